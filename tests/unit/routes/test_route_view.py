"""A route's view of a catalog snapshot: a pure function of the two (actors/routes/view.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.catalog import CatalogView
from actors.catalog.naming import Route
from actors.config.route_schema import RouteConfig, ToolOverride
from actors.protocol.messages import ErrorResponse
from actors.routes.view import fixed_arguments, rename_collisions, route_view

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"repo": {"type": "string"}, "query": {"type": "string"}},
    "required": ["repo", "query"],
}


def catalog() -> CatalogView:
    tools = (
        {"name": "gh__search", "description": "Search code.", "inputSchema": SCHEMA},
        {"name": "gh__delete_repo", "inputSchema": {"type": "object"}},
        {"name": "find", "inputSchema": {"type": "object"}},
    )
    routes = {
        t["name"]: Route("gh" if t["name"].startswith("gh") else "fs", t["name"].split("__")[-1])
        for t in tools
    }
    return CatalogView(
        backends={},
        tools=tools,
        routes=routes,
        tools_version=7,
        prompts=({"name": "gh__review"}, {"name": "fs__tidy"}),
        prompt_routes={"gh__review": Route("gh", "review"), "fs__tidy": Route("fs", "tidy")},
        resources=({"uri": "gh+repo://a"}, {"uri": "file:///etc"}),
        resource_routes={"gh+repo://a": Route("gh", "repo://a"), "file:///etc": Route("fs", "file:///etc")},
        held={"gh__delete_repo": "changed"},
    )


ROUTE = RouteConfig(
    name="dev",
    paths=("/dev",),
    include=("gh__*", "find"),
    exclude=("*delete*",),
    tools={
        "gh__search": ToolOverride(name="find", description="Find.", hide={"repo": "acme/api"}, meta={"k": 1})
    },
)


def test_include_exclude_and_a_rename_that_wins_over_a_catalog_name() -> None:
    view = route_view(catalog(), ROUTE, 1)
    assert [t["name"] for t in view.tools] == ["find"]  # the catalog's own "find" gives way to the rename
    assert view.routes == {"find": Route("gh", "search")}  # its call reaches gh's search, not fs's find
    (find,) = view.tools
    assert find["description"] == "Find." and find["_meta"] == {"k": 1}
    assert find["inputSchema"]["properties"] == {"query": {"type": "string"}}
    assert find["inputSchema"]["required"] == ["query"]
    assert SCHEMA["required"] == ["repo", "query"]  # the catalog's definition is untouched
    assert view.held == {} and view.fixed == {"find": {"repo": "acme/api"}}
    assert [p["name"] for p in view.prompts] == ["gh__review"] and list(view.prompt_routes) == ["gh__review"]
    assert [r["uri"] for r in view.resources] == [] and view.resource_routes == {}


def test_versions_and_news_move_with_the_revision_alone() -> None:
    base = catalog()
    one, two = route_view(base, ROUTE, 1), route_view(base, ROUTE, 2)
    assert len({base.tools_version, one.tools_version, two.tools_version}) == 3
    assert one.news != two.news and one.news != base.news
    assert route_view(base, ROUTE, 1) == one  # pure: the same inputs, the same view


def test_fixed_arguments_are_set_on_a_call_and_refused_from_a_client() -> None:
    view = route_view(catalog(), ROUTE, 1)
    params = fixed_arguments(view, 1, {"name": "find", "arguments": {"query": "x"}})
    assert params == {"name": "find", "arguments": {"query": "x", "repo": "acme/api"}}
    refused = fixed_arguments(view, 1, {"name": "find", "arguments": {"repo": "mine", "query": "x"}})
    assert isinstance(refused, ErrorResponse) and refused.error.code == -32602
    assert "'repo'" in refused.error.message
    for odd in ({"name": ["find"]}, {"name": "find", "arguments": "text"}, {}):  # left to the call's checks
        assert fixed_arguments(view, 1, odd) is odd
    assert fixed_arguments(view, 1, {"name": "find"}) == {"name": "find", "arguments": {"repo": "acme/api"}}


@given(st.text(max_size=40))
def test_a_name_the_route_does_not_show_has_no_route_whatever_its_spelling(name: str) -> None:
    view = route_view(catalog(), ROUTE, 1)
    assert (name in view.routes) == (name == "find")


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ({"name": "x y"}, "is not a name"),
        ({"name": "a", "paths": ["/a/../b"]}, "is not a path"),
        ({"name": "a", "include": ["a\x00"]}, "no control characters"),
        ({"name": "a", "max_output_chars": 10}, "from 1000"),
    ],
)
def test_a_bad_route_table_is_refused_with_its_reason(table: dict[str, Any], reason: str) -> None:
    from actors.config.load import _converter  # the config's own converter: the errors a user reads

    with pytest.raises(Exception) as refused:
        _converter.structure(table, RouteConfig)
    assert reason in repr(refused.value.exceptions if hasattr(refused.value, "exceptions") else refused.value)


def test_a_rename_onto_a_name_the_route_shows_is_a_collision_unless_that_tool_is_renamed_away() -> None:
    view = CatalogView(
        backends={},
        routes={"echo": Route("alpha", "echo"), "pid": Route("alpha", "pid"), "add": Route("beta", "add")},
    )
    onto_pid = RouteConfig(name="r", stdio=True, tools={"echo": ToolOverride(name="pid")})
    assert rename_collisions(view, [onto_pid]) == [
        ("routes[0].tools.echo.name", "'pid' is the public name of alpha's tool 'pid', shown here too")
    ]
    swapped = RouteConfig(
        name="r", stdio=True, tools={"echo": ToolOverride(name="pid"), "pid": ToolOverride(name="process")}
    )
    not_shown = RouteConfig(name="r", stdio=True, exclude=("pid",), tools={"echo": ToolOverride(name="pid")})
    fresh = RouteConfig(name="r", stdio=True, tools={"echo": ToolOverride(name="say")})
    assert rename_collisions(view, [swapped, not_shown, fresh]) == []
