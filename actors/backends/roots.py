"""A backend whose roots are the client's (`roots = "client"`): which of a session's roots changes reach it,
and the change it is told of when the session that may answer its roots/list changes."""

from __future__ import annotations

from actors.backends.connection import BackendLink
from actors.catalog.clients import ClientDirectory
from actors.protocol.envelopes import Notify
from actors.protocol.messages import Notification


def passes_roots_change(
    command: Notify, roots: str | tuple[str, ...], clients: ClientDirectory | None
) -> bool:
    """A session's notification for backends. Roots changes reach only a backend whose roots are the
    client's, and only from the one session connected (whose roots it may ask for)."""
    if command.notification.method != "notifications/roots/list_changed":
        return True
    if roots != "client":
        return False
    if clients is None:
        return True
    return command.asks_to is not None and command.asks_to is clients.only()


async def follow_clients(link: BackendLink, clients: ClientDirectory, addressee: object) -> None:
    """A backend whose roots are the client's, and which asked for them, is told they changed whenever
    the session that may answer changes (another one alone, or none): so a session that has gone does
    not leave its roots behind for the next."""
    while True:
        now = clients.only()
        if now is not addressee:
            addressee = now
            if link.client_requests.asked_roots:
                await link.send(Notification("notifications/roots/list_changed"))
        await clients.wait_changed()
