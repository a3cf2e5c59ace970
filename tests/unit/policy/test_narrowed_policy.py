"""A route's own policy over the gateway's: both must allow, on calls and on lists; either may ask for
approval; the stricter approval setting holds; a route's rule can take away but never give."""

from __future__ import annotations

from actors.catalog import CatalogView
from actors.config.policy_schema import PolicyTable, RuleTable
from actors.identity.principal import Principal
from actors.identity.scope_gate import ScopeGate
from actors.middleware.base import ClientInfo
from actors.policy import Caller, PolicyGate, Target
from actors.policy.narrowed import NarrowedPolicy, narrowed
from actors.policy.rules import Default, Effect, Policy, Unasked

ALICE = Caller(subject="alice", claims={})
BOB = Caller(subject="bob", claims={})


def table(*rules: tuple[str, str], default: str = "allow", **keys: object) -> PolicyTable:
    return PolicyTable(
        default=Default(default),
        rules=tuple(RuleTable(effect=Effect(effect), when=when) for effect, when in rules),
        **keys,  # type: ignore[arg-type]
    )


GATEWAY = table(("deny", 'principal.subject == "bob" && mcp.tool.name == "echo"')).compiled()
ROUTE = table(
    ("deny", 'mcp.tool.name == "pid"'), ("allow", 'mcp.tool.name == "echo"'), default="deny"
).compiled("routes.ops.")


def tool(name: str) -> Target:
    return Target("tools/call", "alpha", tool=name)


def test_both_must_allow_and_the_denial_names_the_rule_that_denied() -> None:
    gate = PolicyGate(narrowed(GATEWAY, ROUTE))
    assert gate.decide(ALICE, tool("echo")).allowed
    outer = gate.decide(BOB, tool("echo"))  # the route's allow does not widen the gateway's deny
    assert (outer.allowed, outer.rule) == (False, "rules[0]")
    inner = gate.decide(ALICE, tool("pid"))
    assert (inner.allowed, inner.rule) == (False, "routes.ops.rules[0]")
    fallen = gate.decide(ALICE, tool("add"))  # the gateway allows it; the route's default denies
    assert (fallen.allowed, fallen.rule) == (False, "default")


def test_a_list_shows_what_both_allow() -> None:
    gate = PolicyGate(narrowed(GATEWAY, ROUTE))
    items = tuple({"name": name} for name in ("echo", "pid", "add"))
    for caller, shown in ((ALICE, ["echo"]), (BOB, [])):
        visible = gate.visible(caller, "tools", 1, items, lambda item: tool(item["name"]))
        assert [item["name"] for item in visible] == shown


def test_narrowing_nothing_is_the_policy_there_is() -> None:
    assert narrowed(None, None) is None
    assert narrowed(GATEWAY, None) is GATEWAY and narrowed(None, ROUTE) is ROUTE
    assert narrowed(GATEWAY, ROUTE) == NarrowedPolicy(GATEWAY, ROUTE)


def test_either_may_ask_for_approval_and_the_stricter_setting_holds() -> None:
    outer = table(approval_ttl_s=600.0, when_unasked="allow").compiled()
    inner = table(
        ("approve", 'mcp.tool.name == "drop"'), approval_ttl_s=60.0, when_unasked="refuse"
    ).compiled("routes.ops.")
    both = narrowed(outer, inner)
    assert isinstance(both, NarrowedPolicy)
    assert both.asks and both.approval_ttl_s == 60.0 and both.when_unasked is Unasked.REFUSE
    gate = PolicyGate(both)
    asked = gate.approval(ALICE, tool("drop"))
    assert asked is not None and (asked.allowed, asked.rule) == (True, "routes.ops.rules[0]")
    assert gate.approval(ALICE, tool("echo")) is None
    destructive = narrowed(table(approve_destructive=True).compiled(), Policy())
    assert isinstance(destructive, NarrowedPolicy) and destructive.approve_destructive


class Renames:
    """A route's state as the scope gate reads it: its view's renames."""

    value = CatalogView(backends={}, canonical={"plus": "add"})


def test_a_scope_gate_judges_a_renamed_tool_by_its_catalog_name() -> None:
    scopes = {"add": frozenset({"tools:add"})}
    bob = Principal("https://id.example", "bob", frozenset({"tools:echo"}))
    tools = [{"name": "plus"}, {"name": "echo"}]
    client = ClientInfo(session="s1")
    assert [t["name"] for t in ScopeGate(bob, scopes, Renames()).filter_tools(client, tools)] == ["echo"]
    assert len(ScopeGate(bob, scopes).filter_tools(client, tools)) == 2  # without the route: no rename known
