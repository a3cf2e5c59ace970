"""Each backend's recent state changes and its last error, read from the catalog's views.

The catalog publishes a new view after every backend fact; the history keeps, per backend, the changes of
state it saw (with the reason and the wall-clock time) and the last reason a backend went down, which the
catalog forgets once the backend is ready again. A Watch hands out only the newest view, so two changes
within one scheduler pass show as one; the restart count does not depend on this (telemetry/meters.py
counts starts).

A backend's last stderr lines are kept apart from the reason, and only those that say WARNING or worse (a
level word such as WARNING, ERROR, CRITICAL, FATAL or PANIC in capitals, a `level=error` or
`"level": "error"` field, a traceback or an exception line): a server's INFO chatter is not an error. Who
may see them is decided when the status is read (status.py).
"""

from __future__ import annotations

import re
import time
from collections import deque
from typing import Any, Final

import attrs
import trio

from actors.catalog import CatalogView
from actors.catalog.status import BackendState
from actors.runtime.watch import Watch

HISTORY_LENGTH: Final = 20  # state changes kept per backend: enough to see a crash loop, small to send
DOWN: Final = frozenset(
    {BackendState.RESTARTING, BackendState.FAILED, BackendState.STOPPED, BackendState.SANDBOX_UNAVAILABLE}
)
STDERR_SEPARATOR: Final = " | "  # how a backend error joins its last stderr lines (backends/process.py)
WARNING_OR_WORSE: Final = re.compile(
    r"\b(?:WARN|WARNING|ERROR|CRITICAL|FATAL|PANIC|SEVERE|ALERT|EMERG|EMERGENCY)\b"
    r"|(?i:\blevel\"?\s*[:=]\s*\"?(?:warn|warning|error|critical|fatal|panic)\b)"
    r"|^Traceback \(most recent call last\)"
    r"|^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)"
)


def warnings_of(stderr: str | None) -> str | None:
    """The lines of `stderr` that say WARNING or worse, joined again; None when there is none."""
    if not stderr:
        return None
    kept = [line for line in stderr.split(STDERR_SEPARATOR) if WARNING_OR_WORSE.search(line)]
    return STDERR_SEPARATOR.join(kept) or None


@attrs.frozen
class StateChange:
    at: float  # wall-clock time (time.time()), for people
    state: str
    reason: str | None
    stderr: str | None = None  # its last stderr lines that say WARNING or worse

    def as_json(self, *, stderr: bool = False) -> dict[str, Any]:
        """With `stderr`, the reason is followed by `; stderr: ` and those lines."""
        reason = self.reason
        if stderr and reason and self.stderr:
            reason = f"{reason}; stderr: {self.stderr}"
        return {"at": self.at, "state": self.state, "reason": reason}


@attrs.define
class StateHistory:
    """Owns: per backend, its last state changes and its last error.
    Receives: catalog views, through the catalog's Watch.
    Sends: a tick on `changed` after each view it read (the status page's event stream wakes on it).
    Stops when: cancelled (with the admin's nursery).
    Errors: none.
    """

    changed: Watch[float]  # shared with the rate sampler: bumped whenever there is something new to show
    changes: dict[str, deque[StateChange]] = attrs.field(factory=dict)
    last_error: dict[str, StateChange] = attrs.field(factory=dict)

    async def run(
        self, catalog: Watch[CatalogView], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        version, view = catalog.version, catalog.value
        self.record(view)
        task_status.started()
        while True:
            version, view = await catalog.wait_newer(version)
            self.record(view)
            self.changed.publish(time.time())

    def record(self, view: CatalogView) -> None:
        """Note every backend whose state differs from the last view's; a new reason for the same state (a
        lost backend's entries leave the catalog first, its supervisor's word on the exit comes next) takes
        the place of the one before, at the time the state began."""
        now = time.time()
        for name, status in view.backends.items():
            kept = self.changes.setdefault(name, deque(maxlen=HISTORY_LENGTH))
            change = StateChange(now, status.state.value, status.reason, warnings_of(status.stderr))
            if kept and kept[-1].state == change.state:
                if (kept[-1].reason, kept[-1].stderr) == (change.reason, change.stderr):
                    continue
                change = attrs.evolve(change, at=kept.pop().at)
            kept.append(change)
            if status.state in DOWN and status.reason:
                self.last_error[name] = change

    def of(self, name: str, *, stderr: bool = False) -> list[dict[str, Any]]:
        return [change.as_json(stderr=stderr) for change in self.changes.get(name, ())]
