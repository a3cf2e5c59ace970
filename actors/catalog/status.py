"""What the catalog knows of one backend's health: its state, why it is in it, and how to say so."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from actors.protocol.envelopes import BackendCommand, CallNow
from actors.runtime.supervisor import ChildExitError, describe, leaves


class BackendState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # mode=require and a rule this kernel cannot enforce


@attrs.frozen(slots=True, kw_only=True)
class BackendStatus:
    name: str
    state: BackendState
    request_timeout_s: float
    calls: trio.MemorySendChannel[BackendCommand] | None = attrs.field(default=None, eq=False, repr=False)
    call_now: CallNow | None = attrs.field(default=None, eq=False, repr=False)  # while calls is set
    reason: str | None = None
    instructions: str | None = None
    settled: bool = False  # it has become ready or ended its first start
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, eq=False)  # what its server offered
    stderr: str | None = None  # the last stderr lines of a process that ended, apart from the reason
    expose_stderr: bool = False  # [gateway] expose_backend_stderr: describe() includes them
    # kind -> (ttlMs, cacheScope) of its last listing: a modern backend's caching hints (legacy: 0, private)
    list_hints: Mapping[str, tuple[int | None, str | None]] = attrs.field(factory=dict, eq=False)

    @property
    def ready(self) -> bool:
        """Calls can be sent to it now."""
        return self.state is BackendState.READY and self.calls is not None

    def describe(self, *, stderr: bool | None = None) -> str:
        """Its state and why, as clients' errors say it: the last stderr lines only with expose_stderr (or
        `stderr=True`, for the operator's own tools)."""
        reason = self.reason
        if reason and self.stderr and (self.expose_stderr if stderr is None else stderr):
            reason = f"{reason}; last stderr: {self.stderr}"
        return f"{self.state.value} ({reason})" if reason else self.state.value

    def down(self, state: BackendState, error: BaseException | None) -> BackendStatus:
        """Down, with the reason clients may be told and, apart, the stderr lines told only when allowed."""
        if error is None:
            reason, stderr = describe(None), None
        else:
            parts = leaves(error)
            # an exit may name its own state (`state = "sandbox_unavailable"`), else the supervisor's
            named = {getattr(leaf, "state", None) for leaf in parts} & {s.value for s in BackendState}
            state = BackendState(named.pop()) if len(named) == 1 else state
            reason = "; ".join(
                leaf.without_stderr if isinstance(leaf, ChildExitError) else describe(leaf) for leaf in parts
            )
            stderr = " | ".join(
                leaf.stderr for leaf in parts if isinstance(leaf, ChildExitError) and leaf.stderr
            )
        return attrs.evolve(
            self, state=state, calls=None, call_now=None, reason=reason, settled=True, stderr=stderr or None
        )
