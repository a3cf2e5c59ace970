"""The bearer-token rules of one listener ([NAME.auth]): its verifier (static key, trusted issuers and
their key sets), what it advertises as an OAuth protected resource, and the refusals a request meets.

    no token, or a bad, expired, foreign or wrong-audience one   401, WWW-Authenticate: Bearer
                                                                  resource_metadata="...", scope="..."
                                                                  (error="invalid_token" when one was sent)
    a good token without the scopes every request needs          403 insufficient_scope

A request naming a session it may not use is answered by the sessions (404), never 401: clients treat 401
as an expired token and loop on refreshing it. The token is never logged; only why it was refused.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit, urlunsplit

import attrs
from loguru import logger

from actors.config import HttpSettings, WebSocketSettings
from actors.config.oauth_schema import InsufficientScope, IssuerTable, OAuthSettings
from actors.frontends.auth import Refused
from actors.identity.keys import KEEPER_POLICY, IssuerKeys, JwksSource, KeysKeeper
from actors.identity.metadata import WELL_KNOWN, ResourceServer, metadata_paths
from actors.identity.principal import Principal
from actors.identity.scope_gate import ScopeGate, missing_scopes
from actors.identity.verifier import Verifier
from actors.identity.verify import MAX_TOKEN_BYTES, IssuerRules, TokenRefusedError
from actors.runtime.supervisor import ChildSpec
from actors.session.settings import SessionSettings

if TYPE_CHECKING:
    from actors.routes import Routes, RouteState

MAX_ROUTE_RESOURCES: Final = 256  # routes' resources kept (MAX_ROUTES is 64: the rest were removed)
MAX_AUTHORIZATION_BYTES: Final = MAX_TOKEN_BYTES + 16  # "Bearer " and some spaces
LEGACY_CHALLENGE: Final = b'Bearer realm="mcp-gateway"'
WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})  # a listener on every address: its URL is no public one


@attrs.frozen(eq=False)
class RouteResource:
    """A route ([[routes]]) as a protected resource of its own: its metadata, its challenges, the scopes
    every request through it needs, and a verifier that also takes tokens for the route's resource URL (a
    token for the listener's whole catalog is good at any of its routes; one for a route, only there)."""

    server: ResourceServer
    verifier: Verifier  # its own cache: a token verified for a route is never taken as one for the listener
    required: frozenset[str]


@attrs.define(eq=False)
class BearerRules:
    """Owns: the listener's verifier and its issuers' key sets (kept across reloads for the same issuer).
    The key sets are kept fresh by `keepers()`, run under the listener's supervisor."""

    oauth: OAuthSettings | None
    verifier: Verifier
    keys: dict[str, IssuerKeys]
    url: str = ""  # the listener's own URL, once bound: the resource when the config names none
    # each route's, made at its first request, made again when the route or the listener's URL changes
    _routes: dict[str, tuple[object, RouteResource]] = attrs.field(factory=dict)

    @classmethod
    def of(
        cls, settings: WebSocketSettings | HttpSettings, kept: dict[str, IssuerKeys] | None = None
    ) -> BearerRules:
        oauth = settings.oauth
        keys: dict[str, IssuerKeys] = {}
        for issuer in oauth.issuers if oauth else ():
            known = (kept or {}).get(issuer.issuer)
            keys[issuer.issuer] = known or IssuerKeys(issuer.issuer, kid_cooldown_s=issuer.kid_cooldown_s)
        rules = cls(oauth, Verifier(static=settings.auth), keys)
        rules.verifier.issuers = {
            i.issuer: (rules.issuer_rules(i), keys[i.issuer]) for i in (oauth.issuers if oauth else ())
        }
        return rules

    def issuer_rules(self, issuer: IssuerTable, route_resource: str | None = None) -> IssuerRules:
        audiences = frozenset(issuer.audiences or (self.resource,)) | frozenset(issuer.client_id_audiences)
        audiences |= {route_resource} if route_resource is not None else set()
        return IssuerRules(
            issuer=issuer.issuer, audiences=audiences, algorithms=issuer.algorithms, leeway_s=issuer.leeway_s
        )

    def bound(self, url: str) -> None:
        """The listener's URL is known: issuers whose audience defaults to it are told."""
        self.url = url
        if self.oauth is not None and self.oauth.resource is None and urlsplit(url).hostname in WILDCARDS:
            logger.warning("[NAME.auth] resource is unset and {} names no host clients reach: set it", url)
        if self.oauth is not None:
            for issuer in self.oauth.issuers:
                self.verifier.issuers[issuer.issuer] = (self.issuer_rules(issuer), self.keys[issuer.issuer])

    @property
    def resource(self) -> str:
        return (self.oauth.resource if self.oauth else None) or self.url

    @property
    def resource_server(self) -> ResourceServer | None:
        if self.oauth is None:
            return None
        return ResourceServer(
            resource=self.resource,
            authorization_servers=tuple(i.issuer for i in self.oauth.issuers),
            scopes_supported=self.oauth.scopes_supported,
            required_scopes=self.oauth.required_scopes,
        )

    def at(self, route: RouteState | None) -> RouteResource | None:
        """`route` as a protected resource (None: no route, or no issuers: the listener's rules hold)."""
        oauth = self.oauth
        if route is None or oauth is None:
            return None
        config = route.config
        key = (config.auth, config.paths, self.resource)
        known = self._routes.get(config.name)
        if known is not None and known[0] == key:
            return known[1]
        if len(self._routes) > MAX_ROUTE_RESOURCES:  # routes a reload removed
            self._routes.clear()
        resource = config.auth.resource or route_resource(self.resource, config.paths)
        verifier = Verifier(static=self.verifier.static)
        verifier.issuers = {
            issuer.issuer: (self.issuer_rules(issuer, resource), self.keys[issuer.issuer])
            for issuer in oauth.issuers
        }
        server = ResourceServer(
            resource=resource,
            authorization_servers=tuple(i.issuer for i in oauth.issuers),
            scopes_supported=config.auth.scopes_supported or oauth.scopes_supported,
            required_scopes=tuple(dict.fromkeys((*oauth.required_scopes, *config.auth.required_scopes))),
        )
        made = RouteResource(server, verifier, frozenset(server.required_scopes))
        self._routes[config.name] = (key, made)
        return made

    def document_at(self, path: str, mcp_path: str, routes: Routes | None) -> bytes | None:
        """The Protected Resource Metadata served at `path`: the listener's (at its own and the bare
        well-known path), a route's (at the well-known path with the route's), or None."""
        server = self.resource_server
        if server is None:
            return None
        if path in metadata_paths(mcp_path):
            return server.document()
        if not path.startswith(WELL_KNOWN + "/") or routes is None:
            return None
        resource = self.at(routes.at(path[len(WELL_KNOWN) :]))
        return resource.server.document() if resource is not None else None

    def keepers(self) -> list[ChildSpec]:
        """One supervised keeper per trusted issuer."""
        specs = []
        for issuer in self.oauth.issuers if self.oauth else ():
            source = JwksSource(
                jwks_url=issuer.jwks_url,
                jwks_file=issuer.jwks_file,
                refresh_min_s=issuer.refresh_min_s,
                refresh_max_s=issuer.refresh_max_s,
            )
            keeper = KeysKeeper(source, self.keys[issuer.issuer])
            specs.append(ChildSpec(issuer.issuer, keeper.run, KEEPER_POLICY, kind="issuer"))
        return specs

    def challenge(
        self,
        error: str | None = None,
        scopes: frozenset[str] | None = None,
        route: RouteResource | None = None,
    ) -> list[tuple[bytes, bytes]]:
        server = route.server if route is not None else self.resource_server
        if server is None:
            value = LEGACY_CHALLENGE + (f', error="{error}"'.encode() if error else b"")
        else:
            value = server.challenge(error=error, scopes=scopes)
        return [(b"www-authenticate", value)]

    async def principal(self, headers: dict[str, str], route: RouteState | None = None) -> Principal:
        """The principal of the request's bearer token, or Refused (401, or 403 for missing scopes that
        every request needs); at a route's path, by the route's rules. `headers` has lower-case names."""
        own = self.at(route)
        authorization = headers.get("authorization", "")
        if len(authorization) > MAX_AUTHORIZATION_BYTES:
            raise Refused(
                401,
                f"the Authorization header is longer than {MAX_AUTHORIZATION_BYTES} bytes",
                self.challenge("invalid_token", route=own),
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            reason = "a bearer token is required (Authorization: Bearer ...)"
            raise Refused(401, reason, self.challenge(route=own))
        verifier = own.verifier if own is not None else self.verifier
        try:
            principal = (await verifier.principal_of(token.strip())).bearing(token.strip())
        except TokenRefusedError as exc:
            challenge = self.challenge("invalid_token", route=own)
            raise Refused(401, f"invalid bearer token: {exc}", challenge) from None
        if own is not None:
            required = own.required
        else:
            required = frozenset(self.oauth.required_scopes) if self.oauth else frozenset()
        if missing := principal.lacks(required):
            reason = f"the token lacks the scopes {' '.join(sorted(missing))}"
            raise Refused(403, reason, self.challenge("insufficient_scope", required, own))
        return principal

    def check_call(self, principal: Principal | None, name: object, route: RouteState | None = None) -> None:
        """With insufficient_scope = "refuse": 403 for a tools/call of a tool the token's scopes do not
        cover, naming every scope the call needs (a route's rename is judged as the catalog's name)."""
        oauth = self.oauth
        if oauth is None or principal is None or oauth.insufficient_scope is not InsufficientScope.REFUSE:
            return
        if not isinstance(name, str):
            return
        tool = route.value.public_tool(name) if route is not None else name
        if not (missing := missing_scopes(principal, tool, oauth.tool_scopes)):
            return
        own = self.at(route)
        required = own.required if own is not None else frozenset(oauth.required_scopes)
        needed = oauth.tool_scopes[tool] | required
        logger.info("a call of {!r} needs the scopes {}", tool, " ".join(sorted(missing)))
        reason = f"calling {name} needs the scopes {' '.join(sorted(needed))}"
        raise Refused(403, reason, self.challenge("insufficient_scope", needed, own))

    def expires_at(self, principal: Principal | None) -> float | None:
        """When the principal's token stops being good here, as Unix time: its `exp` and the issuer's
        leeway (a listener's own key: none, as PyJWT checks it); None when it names no expiry."""
        exp = principal.claims.get("exp") if principal is not None else None
        try:
            seconds = float(exp) if type(exp) in (int, float) else math.nan  # type: ignore[arg-type]
        except OverflowError:  # an integer past any float (PyJWT takes it): as good as never
            return None
        if principal is None or not math.isfinite(seconds):
            return None
        trusted = self.verifier.issuers.get(principal.issuer) if principal.issuer is not None else None
        return seconds + (trusted[0].leeway_s if trusted is not None else 0.0)

    def session_settings(self, principal: Principal | None, settings: SessionSettings) -> SessionSettings:
        """A session's settings: with its scope gate first when tools need scopes."""
        if self.oauth is None or principal is None or not self.oauth.tool_scopes:
            return settings
        gate = ScopeGate(principal, self.oauth.tool_scopes, settings.route)
        return attrs.evolve(settings, middleware=(gate, *settings.middleware))


def route_resource(listener_resource: str, paths: tuple[str, ...]) -> str:
    """A route's resource URL when [routes.auth] names none: the listener's, at the route's first path (a
    stdio-only route has none: the listener's own)."""
    if not paths:
        return listener_resource
    parts = urlsplit(listener_resource)
    return urlunsplit((parts.scheme, parts.netloc, paths[0], "", ""))
