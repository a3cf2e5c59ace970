"""Search mode in a session (actors/discovery/): its tools/list, and calls of search_tools,
get_tool_schema and call_tool.

The exposure searched is the caller's list (the [policy]'s filter, then the middleware's): a tool that list
does not show is never found, never described. call_tool re-enters the session's own tools/call path with
the named tool (policy, limits, approvals, middleware, audit, tracing as for a direct call); an upstream
-32602 comes back with the tool's definition in the error's data."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from actors.catalog import CatalogView, Route
from actors.discovery import answers
from actors.discovery.exposure import CALL_TOOL, GET_TOOL_SCHEMA, META_TOOLS, SEARCH_TOOLS, listing, searching
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response, RpcError, Tool
from actors.session.fields import invalid_field

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher


class _Backends(Mapping[str, str]):
    """public name -> backend, read from the catalog's routes without copying them."""

    def __init__(self, routes: Mapping[str, Route]) -> None:
        self._routes = routes

    def __getitem__(self, name: str) -> str:
        return self._routes[name].backend

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        route = self._routes.get(name)
        return route.backend if route is not None else default


def catalog_reading(view: CatalogView) -> tuple[int, tuple[Tool, ...], Mapping[str, str]]:
    """What the index keeper (actors/discovery/indexes.py) reads of a catalog view."""
    return view.tools_version, view.tools, _Backends(view.routes)


def listed(d: Dispatcher, tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    """The caller's exposure as its tools/list shows it under [discovery]."""
    gate = d.settings.search
    if gate is None:
        return tools
    view = d.catalog.value

    def covered() -> str:
        return gate.summary(view.tools_version, tools, _Backends(view.routes))

    return listing(tools, gate.settings, covered, partial(gate.tokens, view.tools_version, tools))


@attrs.frozen
class Unwrapped:
    """call_tool's inner call: the params a direct tools/call of the named tool would have carried."""

    params: Params
    tool: Tool


def intercept(
    d: Dispatcher, request_id: RequestId, params: Params, exposure: Callable[[], tuple[Tool, ...]]
) -> Message | Unwrapped | None:
    """A call of one of search mode's tools: its answer, or (call_tool) the call to make instead. None:
    not one of them (or not in search mode), the call goes on as it came."""
    gate = d.settings.search
    name = params.get("name")
    if gate is None or name not in META_TOOLS:
        return None
    tools = exposure()
    if not searching(tools, gate.settings, partial(gate.tokens, d.catalog.value.tools_version, tools)):
        return None
    arguments = params.get("arguments")
    if name == SEARCH_TOOLS:
        view = d.catalog.value
        index = gate.index(view.tools_version, view.tools, _Backends(view.routes))
        return Response(request_id, answers.search_result(index, tools, arguments))
    if name == GET_TOOL_SCHEMA:
        return Response(request_id, answers.schema_result(tools, arguments))
    assert name == CALL_TOOL
    arguments = arguments if isinstance(arguments, dict) else {}
    inner, inner_arguments = arguments.get("name"), arguments.get("arguments", {})
    if not isinstance(inner, str) or not inner or inner in META_TOOLS:
        return ErrorResponse(
            request_id, invalid_field("arguments.name", "the name of a tool from search_tools")
        )
    if inner_arguments is not None and not isinstance(inner_arguments, dict):
        return ErrorResponse(request_id, invalid_field("arguments.arguments", "an object"))
    tool = next((tool for tool in tools if tool.get("name") == inner), {"name": inner})
    inner_params: Params = {"name": inner, "arguments": inner_arguments or {}}
    if "_meta" in params:
        inner_params["_meta"] = params["_meta"]
    return Unwrapped(inner_params, tool)


def with_schema(answer: Message, tool: Tool) -> Message:
    """An answer of call_tool: an upstream invalid-params error carries the tool's definition."""
    if isinstance(answer, ErrorResponse):
        return ErrorResponse(answer.id, answers.with_schema(answer.error, tool))
    return answer


def schema_adder(tool: Tool) -> Callable[[RpcError], RpcError]:
    def add(error: RpcError) -> RpcError:
        return answers.with_schema(error, tool)

    return add
