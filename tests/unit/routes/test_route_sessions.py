"""What a session on a route reads from it, live: a reload that changes the route's search mode, output
limit or policy reaches its open sessions from their next request (their settings hold the route itself,
never a copy of what it was)."""

from __future__ import annotations

from actors.catalog import CatalogView
from actors.config.policy_schema import PolicyTable
from actors.config.route_schema import RouteConfig
from actors.discovery.settings import DiscoverySettings
from actors.frontends.routing import bound
from actors.policy import PolicyGate
from actors.policy.narrowed import NarrowedPolicy
from actors.policy.rules import Default
from actors.routes import Routes
from actors.runtime.watch import Watch
from actors.session.settings import SessionSettings


def test_a_reload_reaches_the_open_sessions_of_a_route() -> None:
    catalog = Watch(CatalogView(backends={}))
    gateway_policy = PolicyGate()
    search = RouteConfig(name="r", paths=("/r",), discovery=DiscoverySettings(mode="search"))
    routes = Routes.of([search], catalog, policy=gateway_policy)
    route = routes.at("/r")
    assert route is not None
    _, settings = bound(route, catalog, SessionSettings(server_name="t", settle_timeout_s=1, drain_s=1))
    assert settings.search is route.search is not None and settings.policy is route.gate
    assert settings.policy is not None and settings.policy.policy is None  # no rules anywhere yet
    direct = RouteConfig(name="r", paths=("/r",), policy=PolicyTable(), max_output_chars=5000)
    routes.reconfigure([direct])
    assert settings.search is None  # direct mode now, for the session opened before
    assert settings.policy.policy is not None  # the route's own rules, in the gate it holds
    assert settings.route is not None and settings.route.config.max_output_chars == 5000
    gateway_policy.swap(PolicyTable(default=Default.DENY).compiled())
    routes.reconfigure([direct])  # the reload that swapped the gateway's rules narrows the route's again
    narrowed = settings.policy.policy
    assert isinstance(narrowed, NarrowedPolicy) and narrowed.outer.default is Default.DENY
