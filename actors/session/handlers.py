"""Which handler serves which method: those that answer or decide at once, and those that wait (each in a
task of its own), for legacy requests and for modern ones."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import attrs

from actors.protocol.eras import MODERN_CLIENT_METHODS
from actors.protocol.messages import Message, Params, RequestId, Response
from actors.session import completion, discover, lifecycle, listen, logs, prompts, resources, tools

if TYPE_CHECKING:
    from actors.session.approvals import AskFirst
    from actors.session.dispatcher import Dispatcher
    from actors.session.forward import Forward

# AskFirst: tools/call of a legacy client held for the user's approval (session/approvals.py)
Now = Callable[["Dispatcher", RequestId, Params], "Message | Forward | AskFirst"]
Later = Callable[["Dispatcher", RequestId, Params], Awaitable[Message]]
# Handlers that answer or decide at once, and those that wait (each runs in a task of its own).
NOW: Final[dict[str, Now]] = {
    "ping": lambda d, request_id, params: Response(request_id, {}),
    "tools/list": tools.list_tools,
    "tools/call": tools.call_tool,
    "prompts/list": prompts.list_prompts,
    "prompts/get": prompts.get_prompt,
    "resources/list": resources.list_resources,
    "resources/templates/list": resources.list_templates,
    "resources/read": resources.read_resource,
    "completion/complete": completion.complete,
    "logging/setLevel": logs.set_level,
}
# A modern request's handlers: the legacy ones its era kept, and server/discover. Nothing of its era waits
# but a tool call through middleware.
MODERN_NOW: Final[dict[str, Now]] = {
    **{method: handler for method, handler in NOW.items() if method in MODERN_CLIENT_METHODS},
    "server/discover": discover.discover,
}


@attrs.frozen
class Resume:
    """A handler's decision: this retry continues a parked call (session/bridge.py)."""


RESUME: Final = Resume()
MODERN_LATER: Final[dict[str, Later]] = {"subscriptions/listen": listen.listen}
LATER: Final[dict[str, Later]] = {
    "initialize": lifecycle.initialize,
    "resources/subscribe": resources.subscribe,
    "resources/unsubscribe": resources.unsubscribe,
}
