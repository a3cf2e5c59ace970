"""The client's notifications: initialized, roots/list_changed and cancelled; anything else is ignored, and a
malformed one is dropped and logged (at a bounded rate)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

from loguru import logger

from actors.protocol.codec import clip, is_id, shown
from actors.protocol.messages import Notification, Params
from actors.session import lifecycle, listen, mailbox
from actors.session.settings import SessionState

MAX_REASON_CHARS: Final = 256  # of a client's cancel reason, as passed on to the backend

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def receive_notification(d: Dispatcher, notification: Notification) -> None:
    method, params = notification.method, notification.params
    if params is not None and not isinstance(params, dict):
        d.drop(method, "its params are not an object")
        return
    params = params or {}
    match method:
        case "notifications/initialized" if d.state is SessionState.OPERATING:
            lifecycle.set_client_ready(d)
        case "notifications/initialized" if d.state is SessionState.INITIALIZING:
            if not d.ready_pending:  # one task, however many times the client says it
                d.ready_pending = True
                d.background.start_soon(lifecycle.ready_once_operating, d)
        case "notifications/roots/list_changed" if d.state is SessionState.OPERATING:
            mailbox.tell_backends(d)
        case "notifications/cancelled":
            cancelled(d, params)
        case _:
            logger.opt(lazy=True).debug("ignored notification {}", partial(shown, method))


def cancelled(d: Dispatcher, params: Params) -> None:
    """The client gives up on a request: the backend is told now, so it hears before later calls, and the
    client gets no answer to it."""
    request_id, reason = params.get("requestId"), params.get("reason")
    if not is_id(request_id):
        d.drop("notifications/cancelled", "its requestId is not a string or an integer")
        return
    if reason is not None and not isinstance(reason, str):
        d.drop("notifications/cancelled", "its reason is not a string")
        return
    entry = d.inflight.get(request_id)  # type: ignore[arg-type]
    if entry is None or (entry.modern is None and d.state is not SessionState.OPERATING):
        return  # a legacy session's initialize is never cancelled; a modern request needs no initialize
    entry.silent = True
    listen.close(d, request_id)  # type: ignore[arg-type]
    d.forwarder.stop(entry, clip(reason, MAX_REASON_CHARS) if reason else "cancelled by the client")
