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
from typing import Final
from urllib.parse import urlsplit

import attrs
from loguru import logger

from actors.config import HttpSettings, WebSocketSettings
from actors.config.oauth_schema import InsufficientScope, IssuerTable, OAuthSettings
from actors.frontends.auth import Refused
from actors.identity.keys import KEEPER_POLICY, IssuerKeys, JwksSource, KeysKeeper
from actors.identity.metadata import ResourceServer
from actors.identity.principal import Principal
from actors.identity.scope_gate import ScopeGate, missing_scopes
from actors.identity.verifier import Verifier
from actors.identity.verify import MAX_TOKEN_BYTES, IssuerRules, TokenRefusedError
from actors.runtime.supervisor import ChildSpec
from actors.session.settings import SessionSettings

MAX_AUTHORIZATION_BYTES: Final = MAX_TOKEN_BYTES + 16  # "Bearer " and some spaces
LEGACY_CHALLENGE: Final = b'Bearer realm="mcp-gateway"'
WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})  # a listener on every address: its URL is no public one


@attrs.define(eq=False)
class BearerRules:
    """Owns: the listener's verifier and its issuers' key sets (kept across reloads for the same issuer).
    The key sets are kept fresh by `keepers()`, run under the listener's supervisor."""

    oauth: OAuthSettings | None
    verifier: Verifier
    keys: dict[str, IssuerKeys]
    url: str = ""  # the listener's own URL, once bound: the resource when the config names none

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

    def issuer_rules(self, issuer: IssuerTable) -> IssuerRules:
        audiences = frozenset(issuer.audiences or (self.resource,)) | frozenset(issuer.client_id_audiences)
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
        self, error: str | None = None, scopes: frozenset[str] | None = None
    ) -> list[tuple[bytes, bytes]]:
        server = self.resource_server
        if server is None:
            value = LEGACY_CHALLENGE + (f', error="{error}"'.encode() if error else b"")
        else:
            value = server.challenge(error=error, scopes=scopes)
        return [(b"www-authenticate", value)]

    async def principal(self, headers: dict[str, str]) -> Principal:
        """The principal of the request's bearer token, or Refused (401, or 403 for missing scopes that
        every request needs). `headers` has lower-case names."""
        authorization = headers.get("authorization", "")
        if len(authorization) > MAX_AUTHORIZATION_BYTES:
            raise Refused(
                401,
                f"the Authorization header is longer than {MAX_AUTHORIZATION_BYTES} bytes",
                self.challenge("invalid_token"),
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "a bearer token is required (Authorization: Bearer ...)", self.challenge())
        try:
            principal = (await self.verifier.principal_of(token.strip())).bearing(token.strip())
        except TokenRefusedError as exc:
            raise Refused(401, f"invalid bearer token: {exc}", self.challenge("invalid_token")) from None
        required = frozenset(self.oauth.required_scopes) if self.oauth else frozenset()
        if missing := principal.lacks(required):
            reason = f"the token lacks the scopes {' '.join(sorted(missing))}"
            raise Refused(403, reason, self.challenge("insufficient_scope", required))
        return principal

    def check_call(self, principal: Principal | None, tool: object) -> None:
        """With insufficient_scope = "refuse": 403 for a tools/call of a tool the token's scopes do not
        cover, naming every scope the call needs."""
        oauth = self.oauth
        if oauth is None or principal is None or oauth.insufficient_scope is not InsufficientScope.REFUSE:
            return
        if not isinstance(tool, str) or not (missing := missing_scopes(principal, tool, oauth.tool_scopes)):
            return
        needed = oauth.tool_scopes[tool] | frozenset(oauth.required_scopes)
        logger.info("a call of {!r} needs the scopes {}", tool, " ".join(sorted(missing)))
        reason = f"calling {tool} needs the scopes {' '.join(sorted(needed))}"
        raise Refused(403, reason, self.challenge("insufficient_scope", needed))

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
        gate = ScopeGate(principal, self.oauth.tool_scopes)
        return attrs.evolve(settings, middleware=(gate, *settings.middleware))
