"""The end of a ready run, in its order: the backend's entries leave the catalog, then its calls are answered.

A client whose call failed because its backend died lists tools next; it must not find the dead backend's
tools there (nor page through a list that still holds them). So once a run has reported BackendReady, a loss
of its link (the process died, stopped answering health pings, or its legacy lane did) does not cancel the
run at once: the catalog is told first (BackendLost) and the run's scope is cancelled when the catalog has
published the view without the backend. Every answer to its calls comes after that: those in flight and
queued (the run's `finally`) and the legacy lane's (its own `finally`, as the cancellation reaches it).
"""

from __future__ import annotations

from typing import Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink
from actors.catalog import CatalogEvent
from actors.protocol.envelopes import BackendLost

WITHDRAW_WAIT_S: Final = 1.0  # the catalog publishes within a task step; past this it is stuck: go on


@attrs.define(kw_only=True)
class RunEnd:
    """Owns: whether this run's entries have left the catalog, and the task that ends the run on a loss.
    Receives: the link's loss (`on_lost`), once armed.
    Sends: one BackendLost to the catalog, and waits for its view to be published.
    Stops when: the run's scope is cancelled (by itself, after a loss, or by the run's end).
    Errors: none; a catalog that is gone (the gateway stopping) or stuck is passed over."""

    name: str
    catalog: trio.MemorySendChannel[CatalogEvent]
    link: BackendLink
    _armed: bool = False
    _withdrawn: bool = False
    _lost: trio.Event = attrs.field(factory=trio.Event)

    def arm(self, nursery: trio.Nursery) -> None:
        """From the run's BackendReady on: a loss of the link ends the run through the catalog."""
        self._armed = True
        self.link.on_lost = self._lost.set
        nursery.start_soon(self._end_on_loss)

    async def _end_on_loss(self) -> None:
        await self._lost.wait()
        await self.withdraw()
        self.link.cancel_scope.cancel()

    async def withdraw(self) -> None:
        """Once, and only for a ready run whose link is lost: its entries leave the catalog (shielded: the
        run's `finally` calls it too, for a loss that came before the run was armed)."""
        if not self._armed or self._withdrawn or self.link.lost is None:
            return
        self._withdrawn = True
        lost = BackendLost(self.name, self.link.lost)
        with trio.move_on_after(WITHDRAW_WAIT_S, shield=True) as waited:
            try:
                await self.catalog.send(lost)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the gateway is stopping: nobody lists any more
            await lost.published.wait()
        if waited.cancelled_caught:
            logger.warning(
                "the catalog did not take its tools out within {}s; answering its calls", WITHDRAW_WAIT_S
            )
