"""A session's ResultShaper: which limit a call gets (the tool's, else the route's, else the gateway's),
the raw size that spares measuring, apps named publicly in results, and the tools list it shows."""

from __future__ import annotations

from typing import Any, Final

import trio
from support import captured_logs

from actors.catalog import PREFIX_ON_COLLISION, Catalog, CatalogEvent
from actors.catalog.view import CatalogView
from actors.config.route_schema import RouteConfig
from actors.output.limits import SIZE_META_KEY
from actors.output.settings import OutputGate, OutputLimits
from actors.protocol.envelopes import BackendCommand, BackendReady
from actors.routes import RouteState
from actors.runtime.watch import Watch
from actors.session.results import ResultShaper, Shape

APP: Final = "ui://widget/app.html"


def view() -> CatalogView:
    _, events = trio.open_memory_channel[CatalogEvent](0)
    order = ("alpha", "beta")
    catalog = Catalog(
        order=order, request_timeouts_s=dict.fromkeys(order, 30.0), rule=PREFIX_ON_COLLISION, inbox=events
    )
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    for name in order:
        tools = ({"name": "dump", "inputSchema": {"type": "object"}},)
        catalog.apply(BackendReady(name, tools, calls, resources=({"uri": APP, "name": "app"},)))
    return catalog.view()


def shaper(limits: OutputLimits) -> ResultShaper:
    return ResultShaper(OutputGate(limits), Watch(view()))


def shape_of(results: ResultShaper, backend: str, own: str, public: str) -> Shape:
    shape = results.for_call(backend, own, public)
    assert shape is not None
    return shape


def routed(results: ResultShaper, limit: int) -> RouteState:
    return RouteState(RouteConfig(name="r", stdio=True, max_output_chars=limit), results.catalog)


def text(chars: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "x" * chars}]}


def test_the_tools_limit_else_the_routes_else_the_gateways() -> None:
    results = shaper(OutputLimits(2000, {"beta": {"dump": 60_000}}))
    assert len(shape_of(results, "alpha", "dump", "dump")(text(100_000), None)["content"][0]["text"]) == 2000
    results.route = routed(results, 3000)  # a session on a route
    assert len(shape_of(results, "alpha", "dump", "dump")(text(100_000), None)["content"][0]["text"]) == 3000
    results.route.reconfigure(RouteConfig(name="r", stdio=True, max_output_chars=4000))  # a reload: at once
    assert len(shape_of(results, "alpha", "dump", "dump")(text(100_000), None)["content"][0]["text"]) == 4000
    beta = shape_of(results, "beta", "dump", "beta__dump")(text(100_000), None)
    assert len(beta["content"][0]["text"]) == 60_000


def test_a_raw_answer_within_the_limit_is_not_measured() -> None:
    result = {"content": [], "structuredContent": {"data": "x" * 5000}}
    shape = shape_of(shaper(OutputLimits(2000)), "alpha", "dump", "dump")
    assert shape(result, 1500) is result  # its bytes say it fits (a test's lie: a real frame is its size)
    with captured_logs("INFO") as lines:
        assert shape(result, None)["isError"] is True
    assert lines == [
        "INFO result of tool 'dump' of backend alpha: withheld (structuredContent) at max_output_chars 2000"
    ]


def test_a_result_names_a_namespaced_app_publicly() -> None:
    shape = shape_of(shaper(OutputLimits()), "beta", "dump", "beta__dump")
    shown = shape({"content": [{"type": "resource_link", "uri": APP, "name": "app"}]}, None)
    assert shown["content"][0]["uri"] == "ui://beta/widget/app.html"
    mine = {"content": [{"type": "resource_link", "uri": APP, "name": "app"}]}
    assert shape_of(shaper(OutputLimits()), "alpha", "dump", "dump")(mine, None) is mine  # alpha's: bare


def test_the_list_tells_a_raised_limit_and_is_made_once_per_list() -> None:
    results = shaper(OutputLimits(20_000, {"beta": {"dump": 60_000}}))
    catalog = results.catalog.value
    listed = results.listed(catalog.tools, catalog.routes)
    metas = {tool["name"]: tool.get("_meta", {}) for tool in listed}
    assert metas == {"dump": {}, "beta__dump": {SIZE_META_KEY: 60_000}}
    assert results.listed(catalog.tools, catalog.routes) is listed
    results.output.swap(OutputLimits(20_000))  # a reload
    assert results.listed(catalog.tools, catalog.routes) is catalog.tools  # nothing to tell


def test_a_call_that_nothing_could_change_gets_no_shape() -> None:
    _, events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(order=("a",), request_timeouts_s={"a": 30.0}, rule=PREFIX_ON_COLLISION, inbox=events)
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    catalog.apply(BackendReady("a", ({"name": "t", "inputSchema": {"type": "object"}},), calls))
    results = ResultShaper(OutputGate(OutputLimits()), Watch(catalog.view()))  # no resources, no limit
    assert results.for_call("a", "t", "t") is None
    results.route = routed(results, 5000)
    assert results.for_call("a", "t", "t") is not None
