"""The gateway's tree as JSON (GET /status, `mcp-gateway status`, the status page) and its readiness
(GET /readyz).

Ready means: the first settle is done (every backend became ready or ended its first start, as
`CatalogView.settled` says) and every backend with `required = true` is ready now.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
import trio

from actors import __version__
from actors.admin.history import StateHistory
from actors.catalog import BackendStatus, CatalogView
from actors.identity.keys import IssuerKeys
from actors.runtime.watch import Watch
from actors.telemetry.meters import BackendMeter, Meters

SESSIONS_LISTED: Final = 100  # session ids listed per frontend; the count is always whole


def view_trust(view: CatalogView, backend: str) -> dict[str, Any]:
    """A backend's trust mode and how many of its definitions are hidden now."""
    mode = view.trust.modes.get(backend)
    hidden = sum(1 for key in view.trust.hidden if key.backend == backend)
    return {"mode": mode.value if mode is not None else "off", "hidden": hidden}


@attrs.frozen
class FrontendInfo:
    """One frontend as the gateway sees it now: its name, its URL (none for stdio), its sessions' ids."""

    name: str
    url: str | None
    sessions: tuple[str, ...]
    issuers: tuple[IssuerKeys, ...] = attrs.field(default=(), eq=False)  # its trusted issuers' key sets

    def as_json(self) -> dict[str, Any]:
        listed = list(self.sessions[:SESSIONS_LISTED])
        return {"name": self.name, "url": self.url, "session_count": len(self.sessions), "sessions": listed}


@attrs.define(kw_only=True)
class StatusModel:
    """What /status and /readyz are made of: the catalog's view, the meters, the history, the frontends.
    Read on each request; nothing here is kept between requests."""

    name: str  # [gateway] name
    config_path: str
    catalog: Watch[CatalogView]
    meters: Meters
    history: StateHistory
    frontends: Callable[[], Sequence[FrontendInfo]]
    required: frozenset[str] = frozenset()  # backends with required = true
    started_at: float  # trio time the gateway started
    started_wall: float = attrs.field(factory=time.time)
    url: str = ""  # the admin listener's, once bound
    # with [fleet]: this replica, and whether it shares state through Redis or serves alone
    fleet: Callable[[], dict[str, Any]] | None = None

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the body /readyz answers with): who is not ready, and why."""
        view = self.catalog.value
        waiting = [self._why(status) for status in view.backends.values() if not status.settled]
        missing = [
            self._why(status)
            for name, status in view.backends.items()
            if name in self.required and not status.ready and status.settled
        ]
        ready = view.settled and not missing
        body: dict[str, Any] = {"ready": ready, "settled": view.settled}
        if not ready:
            body["not_ready"] = waiting + missing
        if self.fleet is not None:  # serving alone while Redis is down is serving: ready, and said
            body["fleet"] = self.fleet()
        return ready, body

    def _why(self, status: BackendStatus) -> dict[str, Any]:
        return {"backend": status.name, **self._state(status), "settled": status.settled}

    def _state(self, status: BackendStatus) -> dict[str, Any]:
        return {
            "state": status.state.value,
            "reason": status.reason,
            "required": status.name in self.required,
        }

    def status(self, *, stderr: bool = False) -> dict[str, Any]:
        """The tree. Backends' stderr lines are in it only with `stderr` (the reader gave the admin token)
        or for a backend whose stderr may be told to anyone ([gateway] expose_backend_stderr)."""
        view, now = self.catalog.value, trio.current_time()
        ready, _ = self.readiness()
        tools = Counter(
            view.routes[tool["name"]].backend for tool in view.tools if tool["name"] in view.routes
        )
        return {
            "gateway": {
                "name": self.name,
                "version": __version__,
                "pid": os.getpid(),
                "started_at": self.started_wall,
                "uptime_s": round(now - self.started_at, 3),
                "config": self.config_path,
                "admin_url": self.url,
                "ready": ready,
                "settled": view.settled,
            },
            **({"fleet": self.fleet()} if self.fleet is not None else {}),
            "frontends": [frontend.as_json() for frontend in self.frontends()],
            "trust": self._trust(view),
            "backends": [
                self._backend(
                    status, self.meters.backend(name), tools[name], now, stderr or status.expose_stderr
                )
                for name, status in view.backends.items()
            ],
        }

    @staticmethod
    def _trust(view: CatalogView) -> dict[str, Any]:
        """What trust holds, in brief (definitions and diffs: `mcp-gateway trust`, with the token)."""
        trust = view.trust
        return {
            "held": [
                {
                    "id": held.key.shown,
                    "kind": held.key.kind,
                    "reason": held.reason.value,
                    "hidden": held.key in trust.hidden,
                    "rejected": held.rejected_by is not None,
                    "digest": held.digest[:12],
                }
                for held in trust.held
            ],
            "hidden": len(trust.hidden),
        }

    def _backend(
        self, status: BackendStatus, meter: BackendMeter, tools: int, now: float, stderr: bool
    ) -> dict[str, Any]:
        last_error = self.history.last_error.get(status.name)
        ready_since = meter.ready_since if status.ready else None
        calls = sum(stats.count for stats in (*meter.tools.values(), *meter.methods.values()))
        return {
            "name": status.name,
            **self._state(status),
            "pid": meter.pid,
            "eras": meter.eras,  # "legacy", "modern" or "modern+legacy" (a legacy lane beside it)
            "sandbox": meter.sandbox,  # mode, engines per rule, missing, the probe (actors/sandbox/)
            "uptime_s": round(now - ready_since, 3) if ready_since is not None else None,
            "restarts": meter.restarts,
            "last_error": last_error.as_json(stderr=stderr) if last_error is not None else None,
            "tools": tools,
            "trust": view_trust(self.catalog.value, status.name),
            "inflight": meter.inflight(),
            "listening": meter.listening(),
            "calls": calls,
            "history": self.history.of(status.name, stderr=stderr),
        }
