"""prompts/list and prompts/get."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.protocol.messages import Message, Params, RequestId
from actors.protocol.pages import page
from actors.session import guard
from actors.session.forward import Forward
from actors.session.routing import forward_named

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


def list_prompts(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    view = d.catalog.value
    prompts, version = guard.visible(d, "prompts", view.prompts, view.prompts_version)
    return page(request_id, params, "prompts", prompts, version, d.settings.page_size)


def get_prompt(d: Dispatcher, request_id: RequestId, params: Params) -> Message | Forward:
    return forward_named(d, request_id, params, "prompts/get", "prompt", d.catalog.value.prompt_routes)
