"""Catalog naming and routing: config order decides collisions; restarts never rename anybody."""

from __future__ import annotations

from typing import Any

import trio

from actors.catalog import (
    ALWAYS_PREFIX,
    PREFIX_ON_COLLISION,
    BackendState,
    Catalog,
    CatalogEvent,
    Route,
    assign_public_names,
)
from actors.catalog.catalog import Reconfigured
from actors.config.tool_policy import ToolPolicy
from actors.protocol.envelopes import BackendCommand, BackendLost, BackendReady, ListChanged
from actors.runtime.supervisor import ChildExitError, ChildFailed, ChildRestarting


def tools(*names: str) -> tuple[dict[str, Any], ...]:
    return tuple({"name": n, "description": f"{n} tool", "inputSchema": {"type": "object"}} for n in names)


def test_prefix_on_collision_follows_config_order() -> None:
    names = assign_public_names(
        ["a", "b", "c"], {"c": tools("x"), "b": tools("x", "y"), "a": tools("y")}, PREFIX_ON_COLLISION
    )
    assert names == {"a": {"y": "y"}, "b": {"x": "x", "y": "b__y"}, "c": {"x": "c__x"}}


def test_always_prefix() -> None:
    names = assign_public_names(["a", "b"], {"a": tools("x"), "b": tools("x")}, ALWAYS_PREFIX)
    assert names == {"a": {"x": "a__x"}, "b": {"x": "b__x"}}


def test_duplicates_and_nameless_tools_are_not_routable() -> None:
    odd = ({"name": "x"}, {"name": "x", "description": "again"}, {"description": "no name"})
    assert assign_public_names(["a"], {"a": odd}, PREFIX_ON_COLLISION) == {"a": {"x": "x"}}


def new_catalog(rule: str = PREFIX_ON_COLLISION) -> Catalog:
    _, inbox = trio.open_memory_channel[CatalogEvent](0)
    return Catalog(
        order=["first", "second"], request_timeouts_s={"first": 5.0, "second": 7.0}, rule=rule, inbox=inbox
    )


def ready(name: str, *tool_names: str) -> BackendReady:
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    return BackendReady(name, tools(*tool_names), calls)


def test_starts_unsettled_and_settles_when_every_backend_has_an_outcome() -> None:
    catalog = new_catalog()
    assert not catalog.watch.value.settled
    catalog.apply(ready("second", "x"))
    assert not catalog.view().settled
    catalog.apply(ChildRestarting("first", RuntimeError("boom"), 1.0))
    view = catalog.view()
    assert view.settled
    assert view.backends["first"].state is BackendState.RESTARTING
    assert "boom" in (view.backends["first"].reason or "")
    assert view.backends["second"].request_timeout_s == 7.0


def test_down_backend_leaves_the_list_and_nobody_is_renamed() -> None:
    catalog = new_catalog()
    catalog.apply(ready("first", "search", "a"))
    catalog.apply(ready("second", "search", "b"))
    before = catalog.view()
    assert [t["name"] for t in before.tools] == ["search", "a", "second__search", "b"]
    assert before.routes["second__search"] == Route("second", "search")
    assert before.tools[2]["description"] == "search tool"  # everything else passes through

    catalog.apply(ChildRestarting("first", None, 0.5))
    down = catalog.view()
    assert [t["name"] for t in down.tools] == ["second__search", "b"]
    assert down.routes["search"] == Route("first", "search")  # still known, for the error message
    assert down.tools_version == before.tools_version + 1

    catalog.apply(ready("first", "search", "a"))
    assert catalog.view().tools == before.tools


def test_tools_changed_and_failed_states() -> None:
    catalog = new_catalog()
    catalog.apply(ready("first", "a"))
    catalog.apply(ready("second", "b"))
    version = catalog.view().tools_version
    catalog.apply(ListChanged("first", "tools", tools("a", "c")))
    view = catalog.view()
    assert [t["name"] for t in view.tools] == ["a", "c", "b"]
    assert view.tools_version == version + 1
    catalog.apply(ChildFailed("second", RuntimeError("gave up"), 6))
    view = catalog.view()
    assert view.backends["second"].state is BackendState.FAILED
    assert view.backends["second"].calls is None
    assert [t["name"] for t in view.tools] == ["a", "c"]


def test_unchanged_tools_keep_their_version() -> None:
    catalog = new_catalog()
    catalog.apply(ready("first", "a"))
    catalog.apply(ready("second"))
    version = catalog.view().tools_version
    catalog.apply(ChildRestarting("second", RuntimeError("gone"), 1.0))  # it had no tools
    assert catalog.view().tools_version == version


def test_a_change_a_backend_announced_is_news_even_when_the_list_came_back_the_same() -> None:
    """A list changed and changed back between two listings: a direct client would have heard of it. Its
    version (what cursors are minted for) stays: a client paging through it goes on where it was."""
    catalog = new_catalog()
    catalog.apply(ready("first", "a"))
    before = catalog.view()
    catalog.apply(ListChanged("first", "tools", tools("a")))
    view = catalog.view()
    assert view.news["tools"] == before.news["tools"] + 1 and view.tools_version == before.tools_version
    catalog.apply(ListChanged("first", "prompts", ()))
    view = catalog.view()
    assert view.news["prompts"] == before.news["prompts"] + 1
    assert view.news["tools"] == before.news["tools"] + 1  # told once: the kinds are reset per view
    catalog.apply(ListChanged("first", "tools", tools("a", "b")))
    view = catalog.view()
    assert view.tools_version == before.tools_version + 1 and view.news["tools"] == before.news["tools"] + 2


def test_a_listing_made_to_check_is_news_only_when_the_list_differs() -> None:
    """The fleet's catch-up after Redis was away lists every backend again: the same list is not news (no
    list_changed to every client of every backend), a different one is."""
    catalog = new_catalog()
    catalog.apply(ready("first", "a"))
    before = catalog.view()
    catalog.apply(ListChanged("first", "tools", tools("a"), announced=False))
    catalog.apply(ListChanged("first", "prompts", (), announced=False))
    view = catalog.view()
    assert view.news == before.news and view.tools_version == before.tools_version
    catalog.apply(ListChanged("first", "tools", tools("a", "b"), announced=False))
    view = catalog.view()
    assert view.tools_version == before.tools_version + 1 and view.news["tools"] == before.news["tools"] + 1


async def test_actor_publishes_each_change() -> None:
    send, inbox = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["first"], request_timeouts_s={"first": 1.0}, rule=PREFIX_ON_COLLISION, inbox=inbox
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(catalog.run)
        version = catalog.watch.version
        async with send:
            await send.send(ready("first", "a"))
            version, view = await catalog.watch.wait_newer(version)
            assert [t["name"] for t in view.tools] == ["a"]
    # run returned when its inbox ended


async def test_a_lost_backends_tools_are_out_of_the_published_view_when_it_is_told() -> None:
    """BackendLost: the backend answers its calls once `published` is set; by then the view sessions list
    from holds none of its tools, and the version cursors carry has moved (issue #34)."""
    send, inbox = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["first", "second"],
        request_timeouts_s={"first": 1.0, "second": 1.0},
        rule=PREFIX_ON_COLLISION,
        inbox=inbox,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(catalog.run)
        async with send:
            await send.send(ready("first", "a"))
            await send.send(ready("second", "b"))
            version, view = catalog.watch.version, catalog.watch.value
            while len(view.tools) < 2:
                version, view = await catalog.watch.wait_newer(version)
            before = view.tools_version
            await send.send(lost := BackendLost("first", ChildExitError("connection closed")))
            await lost.published.wait()
            view = catalog.watch.value
            assert [t["name"] for t in view.tools] == ["b"] and view.tools_version == before + 1
            assert view.backends["first"].state is BackendState.RESTARTING
            assert view.backends["first"].describe() == "restarting (connection closed)"
            assert view.routes["a"].backend == "first"  # still known, so a call's error names its owner
            await send.send(gone := BackendLost("nobody", ChildExitError("x")))  # not in the config
            await gone.published.wait()


def test_a_tool_policy_hides_renames_and_annotates_before_the_naming_rule() -> None:
    _, inbox = trio.open_memory_channel[CatalogEvent](0)
    policy = ToolPolicy(
        allow=("get_*", "search", "echo"),
        deny=("get_secret",),
        rename={"search": "find", "echo": "first_echo"},
        annotations={"get_note": {"readOnlyHint": True}},
    )
    catalog = Catalog(
        order=["first", "second"],
        request_timeouts_s={"first": 5.0, "second": 7.0},
        rule=PREFIX_ON_COLLISION,
        inbox=inbox,
        policies={"first": policy},
    )
    catalog.apply(ready("first", "get_note", "get_secret", "search", "echo", "delete_all"))
    catalog.apply(ready("second", "find", "echo"))
    view = catalog.view()
    assert [tool["name"] for tool in view.tools] == ["get_note", "find", "first_echo", "second__find", "echo"]
    assert view.routes["find"] == Route("first", "search")  # called under the backend's own name
    assert view.routes["second__find"] == Route("second", "find")
    assert view.routes["echo"] == Route("second", "echo")  # no collision once first's echo is renamed
    assert "get_secret" not in view.routes and "delete_all" not in view.routes
    note = next(tool for tool in view.tools if tool["name"] == "get_note")
    assert note["annotations"] == {"readOnlyHint": True}


def test_a_reload_reshapes_the_catalog_in_one_step() -> None:
    """Reconfigured: the removed leave, the fresh start over, the rest keep their lists; one new version of
    each list, so each session tells its client once."""
    catalog = new_catalog()
    catalog.apply(ready("first", "x", "shared"))
    catalog.apply(ready("second", "shared", "y"))
    before = catalog.view()
    assert [t["name"] for t in before.tools] == ["x", "shared", "second__shared", "y"]
    catalog.apply(
        Reconfigured(
            order=("second", "third"),
            request_timeouts_s={"second": 9.0, "third": 1.0},
            policies={},
            rule=ALWAYS_PREFIX,
            expose_stderr=True,
            fresh=frozenset({"third"}),
        )
    )
    after = catalog.view()
    assert list(after.backends) == ["second", "third"]
    assert [t["name"] for t in after.tools] == ["second__shared", "second__y"]  # the new rule, second kept
    assert after.backends["second"].state is BackendState.READY
    assert after.backends["third"].state is BackendState.STARTING and not after.settled
    assert after.tools_version == before.tools_version + 1
