"""A one_for_one supervisor whose children can be added, stopped and replaced while it runs (OTP's
start_child and terminate_child), for a gateway that reloads its config without stopping.

Each child is supervised exactly as `supervise` does it (supervisor.py: restart types, intensity, backoff),
in a cancel scope of its own: stopping one cancels that scope and waits until the child has finished its
cleanup, so a backend stopped for a reload has answered its calls in flight and ended its process before
the one that replaces it starts. Siblings never see any of it.
"""

from __future__ import annotations

import attrs
import trio
from loguru import logger

from actors.runtime.supervisor import ChildEvent, ChildSpec, supervise_child


@attrs.define(eq=False)
class _Child:
    spec: ChildSpec
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)


@attrs.define(eq=False)
class Children:
    """Owns: its children's supervision tasks, by child id, in its nursery.
    Receives: `start`, `stop` and `replace` while it runs.
    Sends: each child's ChildEvents to `events` (as `supervise` does).
    Stops when: cancelled; a child that stopped for good stays in the table until it is stopped or replaced.
    Errors: starting an id that runs already, or stopping one it does not have, is a programming error
        (ValueError, KeyError)."""

    events: trio.MemorySendChannel[ChildEvent]
    _nursery: trio.Nursery | None = None
    _children: dict[str, _Child] = attrs.field(factory=dict)

    async def run(
        self, specs: list[ChildSpec], *, task_status: trio.TaskStatus[Children] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with self.events:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for spec in specs:
                    self.start(spec)
                task_status.started(self)
                await trio.sleep_forever()

    def ids(self) -> list[str]:
        return list(self._children)

    def start(self, spec: ChildSpec) -> None:
        if spec.id in self._children:
            raise ValueError(f"child {spec.id!r} runs already")
        assert self._nursery is not None, "start() before run() started"
        child = self._children[spec.id] = _Child(spec)
        self._nursery.start_soon(self._supervise, child, name=f"supervise:{spec.id}")

    async def stop(self, child_id: str) -> None:
        """Cancel the child and wait for its cleanup (shielded from nothing: the caller may be cancelled)."""
        child = self._children.pop(child_id)
        child.scope.cancel()
        await child.done.wait()

    async def replace(self, spec: ChildSpec) -> None:
        """The child stopped and started again with a new spec, under the same id."""
        await self.stop(spec.id)
        self.start(spec)

    async def _supervise(self, child: _Child) -> None:
        try:
            with child.scope:
                await supervise_child(child.spec, self.events.clone())
        finally:
            child.done.set()
            if child.scope.cancelled_caught:
                with logger.contextualize(**{child.spec.kind: child.spec.id}):
                    logger.info("stopped by a reload")
