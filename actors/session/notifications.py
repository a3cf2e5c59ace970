"""The client's notifications: initialized, roots/list_changed and cancelled; anything else is ignored, and a
malformed one is dropped and logged (at a bounded rate)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from loguru import logger

from actors.protocol.codec import shown
from actors.protocol.messages import Notification
from actors.session import lifecycle, mailbox
from actors.session.settings import SessionState

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
            d._cancelled(params)
        case _:
            logger.opt(lazy=True).debug("ignored notification {}", partial(shown, method))
