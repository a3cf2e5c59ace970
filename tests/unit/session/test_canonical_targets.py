"""[policy] judges the one canonical target a request reaches, never the client's spelling of it (#34).

The router takes several spellings to the same backend URI: a URI as listed, under a template, or with an
explicit `backend+` prefix (also for a URI published bare). Generated catalogs (backends, their resources,
templates and tools, both naming rules) and rules over the public forms: every spelling the router takes
gets the decision of its canonical form, for resources/read and resources/subscribe (the handlers every era,
batch and retry goes through), and tools/call, prompts/get and completion refs by their one public name.
Real catalog, real compiled rules, the session's own handlers on a Dispatcher."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.catalog import ALWAYS_PREFIX, PREFIX_ON_COLLISION, Catalog, CatalogEvent, Route
from actors.catalog.resource_routes import public_uri, resource_route
from actors.config.route_schema import RouteConfig, ToolOverride
from actors.config.tool_policy import ToolPolicy
from actors.policy import Caller, PolicyGate, Target
from actors.policy.context import SAMPLE
from actors.policy.rules import Default, Effect, Policy, compile_rule
from actors.protocol.envelopes import BackendCommand, BackendReady
from actors.protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND
from actors.protocol.messages import ErrorResponse, Message
from actors.routes.view import route_view
from actors.session import completion, guard, resources
from actors.session.dispatcher import Dispatcher
from actors.session.forward import Forward
from actors.session.routing import forward_named
from actors.session.settings import SessionSettings

BACKENDS: Final = ("rec", "a", "b")
URIS: Final = (
    "rec://admin/secret",
    "rec://admin/other",
    "file:///t",
    "a+file:///t",
    "rec+rec://admin/secret",
)
TEMPLATES: Final = ("rec://admin/{id}", "file:///{path}")
TOOLS: Final = ("echo", "deploy", "a__echo")
CALLER: Final = Caller(subject="alice", issuer="idp", listener="http", address="10.0.0.1")


def catalog_of(
    order: tuple[str, ...], rule: str, lists: dict[str, dict[str, Any]], renames: dict[str, dict[str, str]]
) -> Catalog:
    _, events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=order,
        request_timeouts_s=dict.fromkeys(order, 30.0),
        rule=rule,
        inbox=events,
        policies={name: ToolPolicy(rename=renames.get(name, {})) for name in order},
    )
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    for name in order:
        mine = lists[name]
        catalog.apply(
            BackendReady(
                name,
                tuple({"name": tool, "inputSchema": {"type": "object"}} for tool in mine["tools"]),
                calls,
                prompts=tuple({"name": prompt} for prompt in mine["tools"]),
                resources=tuple({"uri": uri, "name": uri} for uri in mine["uris"]),
                templates=tuple({"uriTemplate": t, "name": t} for t in mine["templates"]),
                capabilities={"resources": {"subscribe": True}, "prompts": {}, "completions": {}},
            )
        )
    catalog.watch.publish(catalog.view())
    return catalog


def in_trio(check: Callable[[], None]) -> None:
    """Run `check` where Trio's clock is (a Dispatcher reads it), as the session's handlers run."""

    async def run() -> None:
        check()

    trio.run(run)


def session_of(catalog: Catalog, gate: PolicyGate) -> Dispatcher:
    inbox, _ = trio.open_memory_channel[Message](0)
    _, outbox = trio.open_memory_channel[Message](0)
    settings = SessionSettings(server_name="t", settle_timeout_s=1.0, drain_s=1.0, policy=gate)
    return Dispatcher(
        session="s", inbox=inbox, outbox=outbox, catalog=catalog.watch, settings=settings
    )  # not run: its handlers are called as the dispatcher calls them


def spellings() -> set[str]:
    """What a client may send: each URI, template expansion, and one or two `backend+` prefixes of them."""
    bare = {*URIS, "rec://admin/42", "file:///x", "a+rec://admin/secret"}
    once = {f"{backend}+{uri}" for backend in (*BACKENDS, "nobody") for uri in bare}
    return bare | once | {f"{backend}+{uri}" for backend in BACKENDS for uri in once}


def rule_on(kind: str, value: str) -> str:
    quoted = value.replace("\\", "\\\\").replace('"', '\\"')
    return {
        "equals": f'mcp.resource.uri == "{quoted}"',
        "prefix": f'mcp.resource.uri.startsWith("{quoted}")',
        "backend": f'mcp.backend == "{quoted}" && mcp.resource.uri.startsWith("rec://admin/")',
        "tool": f'mcp.tool.name == "{quoted}" || mcp.prompt.name == "{quoted}"',
    }[kind]


listing = st.fixed_dictionaries(
    {
        "uris": st.lists(st.sampled_from(URIS), max_size=4, unique=True),
        "templates": st.lists(st.sampled_from(TEMPLATES), max_size=2, unique=True),
        "tools": st.lists(st.sampled_from(TOOLS), max_size=3, unique=True),
    }
)
catalogs = st.tuples(
    st.permutations(BACKENDS).flatmap(lambda order: st.integers(1, 3).map(lambda n: tuple(order[:n]))),
    st.sampled_from([PREFIX_ON_COLLISION, ALWAYS_PREFIX]),
    st.fixed_dictionaries({name: listing for name in BACKENDS}),
    st.fixed_dictionaries(
        {name: st.sampled_from([{}, {"echo": "deploy"}, {"deploy": "echo"}]) for name in BACKENDS}
    ),
)
rules = st.lists(
    st.tuples(
        st.sampled_from([Effect.DENY, Effect.ALLOW]),
        st.sampled_from(["equals", "prefix", "backend", "tool"]),
        st.sampled_from([*URIS, "rec://admin/", "a+", "rec+rec://", *BACKENDS, *TOOLS, "a__deploy"]),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogs, rules, st.sampled_from(list(Default)))
def test_every_spelling_the_router_takes_gets_the_decision_of_its_canonical_form(
    shape: tuple[tuple[str, ...], str, dict[str, Any], dict[str, dict[str, str]]],
    written: list[tuple[Effect, str, str]],
    default: Default,
) -> None:
    in_trio(lambda: check_spellings(shape, written, default))


def check_spellings(
    shape: tuple[tuple[str, ...], str, dict[str, Any], dict[str, dict[str, str]]],
    written: list[tuple[Effect, str, str]],
    default: Default,
) -> None:
    order, rule, lists, renames = shape
    compiled = tuple(
        compile_rule(effect, rule_on(kind, value), f"r{n}", SAMPLE)
        for n, (effect, kind, value) in enumerate(written)
    )
    gate = PolicyGate(Policy(default, compiled))
    catalog = catalog_of(order, rule, lists, renames)
    d, view = session_of(catalog, gate), catalog.view()

    def canonical_allows(method: str, route: Route) -> bool:
        return gate.decide(CALLER, Target(method, route.backend, uri=public_uri(view, route))).allowed

    for spelled in spellings():
        route = resource_route(view, spelled)
        if route is None:
            continue
        public = public_uri(view, route)
        assert resource_route(view, public) in (route, None)  # the canonical form names that URI, or none
        assert public in (route.own, f"{route.backend}+{route.own}")
        for method in ("resources/read", "resources/subscribe"):
            routed = resources.owner(d, 1, {"uri": spelled}, method)
            if canonical_allows(method, route):
                assert not isinstance(routed, ErrorResponse), (spelled, method, routed)
                assert routed[1] == route.own  # what the backend is sent
            else:
                assert isinstance(routed, ErrorResponse) and routed.error.code == RESOURCE_NOT_FOUND
                assert routed.error.data == {"uri": spelled}  # named as the client wrote it
        read = resources.read_resource(d, 2, {"uri": spelled})
        if isinstance(read, Forward):
            assert read.params["uri"] == route.own
            assert read.target == Target("resources/read", route.backend, uri=public)  # later rounds too

    for item in view.resources:  # what lists show is the canonical form: a rule on it is a rule on the URI
        route = view.resource_routes[item["uri"]]
        assert public_uri(view, route) == item["uri"]

    names = list(view.routes.items())
    assert len({route for _, route in names}) == len(
        names
    )  # one public name per backend tool: no 2nd spelling
    for name, route in names:
        target = guard.named_target(view, "tools/call", "tool", name, route)
        routed = forward_named(d, 3, {"name": name}, "tools/call", "tool", view.routes)
        assert isinstance(routed, Forward) == gate.decide(CALLER, target).allowed
        # a route's rename is a second spelling of the same tool: judged as the catalog's name
        renamed = route_view(
            view, RouteConfig(name="r", stdio=True, tools={name: ToolOverride(name="z9")}), 1
        )
        assert guard.named_target(renamed, "tools/call", "tool", "z9", renamed.routes["z9"]) == target
    for name, route in view.prompt_routes.items():
        allowed = gate.decide(CALLER, Target("completion/complete", route.backend, prompt=name)).allowed
        answer = completion.complete(d, 4, {"ref": {"type": "ref/prompt", "name": name}, "argument": {}})
        assert isinstance(answer, Forward) == allowed
        if not allowed:
            assert isinstance(answer, ErrorResponse) and answer.error.code == INVALID_PARAMS


async def test_a_rule_on_a_public_uri_denies_the_explicit_prefix_of_it_too() -> None:
    """The issue's case: a rule on rec://admin/secret, read as rec+rec://admin/secret (taken for a URI
    published bare), and a URI nobody lists, reached only by its prefix, under a rule on its bare form."""
    lists = {"rec": {"uris": ["rec://admin/secret"], "templates": [], "tools": []}}
    catalog = catalog_of(("rec",), PREFIX_ON_COLLISION, lists, {})
    rules = (
        compile_rule(Effect.DENY, 'mcp.resource.uri == "rec://admin/secret"', "secret", SAMPLE),
        compile_rule(Effect.DENY, 'mcp.resource.uri.startsWith("rec://admin/hidden")', "hidden", SAMPLE),
    )
    d = session_of(catalog, PolicyGate(Policy(Default.ALLOW, rules)))
    for spelled in ("rec://admin/secret", "rec+rec://admin/secret", "rec+rec://admin/hidden"):
        for method in ("resources/read", "resources/subscribe"):
            refused = resources.owner(d, 1, {"uri": spelled}, method)
            assert isinstance(refused, ErrorResponse) and refused.error.data == {"uri": spelled}, spelled
    allowed = resources.read_resource(d, 2, {"uri": "rec+rec://admin/open"})
    assert isinstance(allowed, Forward) and allowed.params["uri"] == "rec://admin/open"
