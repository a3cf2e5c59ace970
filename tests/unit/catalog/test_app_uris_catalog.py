"""MCP Apps in the catalog: `ui://` resources namespaced with their scheme kept, tools pointing at them
under the public form, and both spellings of a namespaced app reaching (and judged as) the same URI."""

from __future__ import annotations

from typing import Any, Final

import pytest
import trio

from actors.catalog import ALWAYS_PREFIX, PREFIX_ON_COLLISION, Catalog, CatalogEvent, Route
from actors.catalog.resource_routes import public_uri, resource_route
from actors.catalog.view import CatalogView
from actors.protocol.envelopes import BackendCommand, BackendReady

APP: Final = "ui://widget/app.html"
META: Final[dict[str, Any]] = {"ui": {"resourceUri": APP}, "ui/resourceUri": APP}


def view_of(rule: str) -> CatalogView:
    """alpha and beta (in that order) each list the same app and a tool pointing at it."""
    _, events = trio.open_memory_channel[CatalogEvent](0)
    order = ("alpha", "beta")
    catalog = Catalog(order=order, request_timeouts_s=dict.fromkeys(order, 30.0), rule=rule, inbox=events)
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    for name in order:
        tool = {"name": "show", "inputSchema": {"type": "object"}, "_meta": META}
        catalog.apply(BackendReady(name, (tool,), calls, resources=({"uri": APP, "name": "app"},)))
    return catalog.view()


def test_a_colliding_app_is_namespaced_with_its_scheme_and_its_tool_points_there() -> None:
    view = view_of(PREFIX_ON_COLLISION)
    assert [resource["uri"] for resource in view.resources] == [APP, "ui://beta/widget/app.html"]
    metas = {tool["name"]: tool["_meta"] for tool in view.tools}
    assert metas["show"] == META  # the first backend's: bare, the definition as the backend gave it
    beta = "ui://beta/widget/app.html"
    assert metas["beta__show"] == {"ui": {"resourceUri": beta}, "ui/resourceUri": beta}


@pytest.mark.parametrize("spelled", ["ui://beta/widget/app.html", "beta+ui://widget/app.html"])
def test_both_spellings_of_a_namespaced_app_reach_and_are_judged_as_one_uri(spelled: str) -> None:
    view = view_of(PREFIX_ON_COLLISION)
    route = resource_route(view, spelled)
    assert route == Route("beta", APP)
    assert public_uri(view, route, spelled) == "ui://beta/widget/app.html"


def test_always_prefix_namespaces_every_app() -> None:
    view = view_of(ALWAYS_PREFIX)
    assert [resource["uri"] for resource in view.resources] == [
        "ui://alpha/widget/app.html",
        "ui://beta/widget/app.html",
    ]
    assert {tool["name"]: tool["_meta"]["ui"]["resourceUri"] for tool in view.tools} == {
        "alpha__show": "ui://alpha/widget/app.html",
        "beta__show": "ui://beta/widget/app.html",
    }
    assert resource_route(view, APP) is None  # nobody publishes it bare


def test_a_colliding_app_template_keeps_its_scheme_and_routes_back() -> None:
    _, events = trio.open_memory_channel[CatalogEvent](0)
    order = ("alpha", "beta")
    catalog = Catalog(
        order=order, request_timeouts_s=dict.fromkeys(order, 30.0), rule=PREFIX_ON_COLLISION, inbox=events
    )
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    for name in order:
        template = {"uriTemplate": "ui://widget/{id}.html", "name": "w"}
        catalog.apply(BackendReady(name, (), calls, templates=(template,)))
    view = catalog.view()
    assert [t["uriTemplate"] for t in view.templates] == [
        "ui://widget/{id}.html",
        "ui://beta/widget/{id}.html",
    ]
    assert resource_route(view, "ui://widget/7.html") == Route("alpha", "ui://widget/7.html")
    for spelled in ("ui://beta/widget/7.html", "beta+ui://widget/7.html"):
        route = resource_route(view, spelled)
        assert route == Route("beta", "ui://widget/7.html")
        assert public_uri(view, route, spelled) == "ui://beta/widget/7.html"
