"""Each backend's recent state changes and its last error, read from the catalog's views.

The catalog publishes a new view after every backend fact; the history keeps, per backend, the changes of
state it saw (with the reason and the wall-clock time) and the last reason a backend went down, which the
catalog forgets once the backend is ready again. A Watch hands out only the newest view, so two changes
within one scheduler pass show as one; the restart count does not depend on this (meters.py counts starts).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Final

import attrs
import trio

from actors.catalog import CatalogView
from actors.catalog.status import BackendState
from actors.runtime.watch import Watch

HISTORY_LENGTH: Final = 20  # state changes kept per backend: enough to see a crash loop, small to send
DOWN: Final = frozenset({BackendState.RESTARTING, BackendState.FAILED, BackendState.STOPPED})


@attrs.frozen
class StateChange:
    at: float  # wall-clock time (time.time()), for people
    state: str
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "state": self.state, "reason": self.reason}


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
        """Note every backend whose state or reason differs from the last view's."""
        now = time.time()
        for name, status in view.backends.items():
            kept = self.changes.setdefault(name, deque(maxlen=HISTORY_LENGTH))
            reason = status.reason
            if reason and status.stderr:
                reason = f"{reason}; last stderr: {status.stderr}"  # the operator sees what clients may not
            change = StateChange(now, status.state.value, reason)
            if kept and (kept[-1].state, kept[-1].reason) == (change.state, change.reason):
                continue
            kept.append(change)
            if status.state in DOWN and status.reason:
                self.last_error[name] = change

    def of(self, name: str) -> list[dict[str, Any]]:
        return [change.as_json() for change in self.changes.get(name, ())]
