"""A session's mailbox: everything that comes to it unasked, read by one task. Backends' requests for the
client and their withdrawals, backend events (logs, resource updates), and catalog changes to announce."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Final

import trio

from actors.protocol.envelopes import BackendEvent, Mail, Notify
from actors.protocol.messages import Notification
from actors.session import guard, listen, logs
from actors.session.lifecycle import CATALOG_CHANGED
from actors.session.settings import SessionState

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

ROOTS_CHANGED: Final = Notification("notifications/roots/list_changed")


async def read(
    d: Dispatcher, mailbox: trio.MemoryReceiveChannel[Mail], to: trio.MemorySendChannel[Mail]
) -> None:
    events = d.settings.events
    with d.catalog.follow(to, CATALOG_CHANGED), events.deliver_to(to) if events else nullcontext():
        async for item in mailbox:
            if isinstance(item, BackendEvent):
                note = logs.for_client(d, item)
                if note is not None:
                    await d.send(note)
                if d.listens:
                    await listen.updated(d, item)
            elif item is not CATALOG_CHANGED:
                await d.client_asks.take(item, d.state is SessionState.OPERATING)  # type: ignore[arg-type]
            if d.client_ready.is_set():
                await announce_list_changes(d)
            if d.listens:
                await listen.announce(d)


async def announce_list_changes(d: Dispatcher) -> None:
    """notifications/{tools,prompts,resources}/list_changed for each list changed since the client was last
    told."""
    versions = guard.news(d)
    for kind, current in versions.items():
        if d.announced.get(kind, 0) != current:
            d.announced[kind] = current
            await d.send(Notification(f"notifications/{kind}/list_changed"))


def tell_backends(d: Dispatcher) -> None:
    """The client's roots changed: every ready backend hears it (as the gateway's own notification, so
    nothing else the client put in it goes along)."""
    command = Notify(ROOTS_CHANGED, d.asks_to)
    for status in d.catalog.value.backends.values():
        if status.ready:
            assert status.calls is not None
            d.forwarder.commands.send(status.calls, command, d.background)
