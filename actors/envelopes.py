"""Internal actor messages. Commands are imperatives, facts are past tense (STYLE.md)."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import trio

from actors.messages import Message, Notification, RequestId, RpcError

_call_ids = itertools.count(1)


def next_call_id() -> int:
    """A gateway-wide unique id. Backends use it as their backend-side request id, so ids from different
    sessions (or from the gateway itself) never collide on any backend."""
    return next(_call_ids)


@attrs.frozen(slots=True)
class Reply:
    """Backend -> requester: the backend's answer, with `result` or `error`."""

    result: Any = None
    error: RpcError | None = None


@attrs.frozen(slots=True, eq=False)
class Call:
    """Requester -> Backend: forward one request. The backend answers on `reply_to` exactly once, even when it
    dies (then with an error naming itself), and sends progress for it to `notify_to`."""

    call_id: int
    method: str
    params: dict[str, Any] | None
    session: str
    reply_to: trio.MemorySendChannel[Reply] = attrs.field(repr=False)
    notify_to: trio.MemorySendChannel[Message] | None = attrs.field(default=None, repr=False)
    progress_token: RequestId | None = None  # the client's token; the backend sees call_id instead


@attrs.frozen(slots=True)
class Cancel:
    """Requester -> Backend: the caller gave up on a call (client cancel or timeout). The backend forgets it
    and tells the server with notifications/cancelled."""

    call_id: int
    reason: str


BackendCommand = Call | Cancel


@attrs.frozen(slots=True)
class BackendReady:
    """Backend -> Catalog: a run finished its handshake and first tools/list; calls go to `calls`."""

    name: str
    tools: tuple[dict[str, Any], ...]
    calls: trio.MemorySendChannel[BackendCommand] = attrs.field(eq=False, repr=False)
    server_info: dict[str, Any] = attrs.field(factory=dict, eq=False)
    instructions: str | None = None
    prompts: tuple[dict[str, Any], ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()  # resource templates


@attrs.frozen(slots=True)
class BackendEvent:
    """Backend -> every session (through a Broadcast): a notification that is not about one call, such as
    notifications/message or notifications/resources/updated. Each session decides whether it is its."""

    backend: str
    notification: Notification


@attrs.frozen(slots=True)
class ListChanged:
    """Backend -> Catalog: one of the backend's lists (tools, prompts, resources, templates) changed,
    after its list_changed notification and a fresh listing."""

    name: str
    kind: str
    items: tuple[dict[str, Any], ...]
