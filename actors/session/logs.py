"""logging/setLevel, and which backends' log messages and resource updates a session passes on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from actors.protocol.envelopes import BackendEvent
from actors.protocol.messages import ErrorResponse, Message, Notification, Params, RequestId, Response
from actors.protocol.modern_results import legacy_result
from actors.protocol.versions import LOG_LEVELS
from actors.session.fields import invalid_field

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

LOG_SEVERITY: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def set_level(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    level = params.get("level")
    if not isinstance(level, str) or level not in LOG_SEVERITY:
        return ErrorResponse(request_id, invalid_field("level", f"one of {', '.join(LOG_SEVERITY)}"))
    d.log_level = LOG_SEVERITY[level]
    if d.forwarder.envelope is not None:  # modern backends hear it on each call of this session
        d.forwarder.envelope = attrs.evolve(d.forwarder.envelope, log_level=level)
    return Response(request_id, {})


def for_client(d: Dispatcher, event: BackendEvent) -> Notification | None:
    """What backends say to everyone, filtered for this session once its client is ready: log messages at
    or above its level, updates of the resources it subscribed to (under the URI it used). Takes any params
    shape: what it cannot read is dropped, never raised."""
    if not d.client_ready.is_set():
        return None
    note = event.notification
    params = legacy_result(note.params) if note.params is not None else {}  # a modern backend's _meta keys
    source = f"backend {event.backend}"
    if not isinstance(params, dict):
        d.drop(note.method, "its params are not an object", source)
        return None
    if note.method == "notifications/message":
        level = params.get("level")
        if not isinstance(level, str):
            d.drop(note.method, "its level is not a string", source)
        elif LOG_SEVERITY.get(level, 0) >= d.log_level:
            return note if params is note.params else Notification(note.method, params)
    elif note.method == "notifications/resources/updated":
        uri = params.get("uri")
        if not isinstance(uri, str):
            d.drop(note.method, "its uri is not a string", source)
            return None
        public = d.subscriptions.get((event.backend, uri))
        if public is not None:
            return Notification(note.method, {**params, "uri": public})
    return None
