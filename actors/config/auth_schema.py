"""[backends.auth]: how the gateway authenticates to a remote backend, on its own account or on behalf of
the caller, and which client headers such a backend may be sent (`forward_headers`).

    auth = { kind = "static", header = "X-Api-Key", format = "{secret}", secret = { env = "KEY" } }
    [backends.auth]  kind = "client_credentials"   the gateway's own token from a token endpoint
    [backends.auth]  kind = "token_exchange"       RFC 8693: the caller's token exchanged for one whose
                                                   audience is this backend

A header name is an HTTP token; a format holds its placeholder once and only visible ASCII and spaces, so
no config can put a line break or a second header into a request. Which kind a table is, `kind` says; each
kind has only its own keys.
"""

from __future__ import annotations

import enum
import re
from typing import Final

import attrs

from actors.config.checks import Validator, at_least, every, not_blank, positive, rule
from actors.config.oauth_schema import http_url, is_url, scope_token
from actors.config.secret import Secret

HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
_VISIBLE: Final = re.compile(r"[\x20-\x7e]*")
_CLIENT_ID: Final = re.compile(r"[\x21-\x7e]+")  # what RFC 6749 allows, less the space
# Headers the gateway itself writes on a request to a backend: neither auth nor forward_headers may set one.
PROTOCOL_HEADERS: Final = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
        "sec-websocket-protocol",
        "te",
        "transfer-encoding",
        "upgrade",
    }
)
PROTOCOL_PREFIXES: Final = ("mcp-param-", "sec-websocket-")
CLIENT_CREDENTIAL_HEADERS: Final = frozenset({"authorization", "cookie", "proxy-authorization"})
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"

resource_uri: Final = rule(
    lambda uri: is_url(uri, ("http", "https", "ws", "wss")),
    "{value!r} is not an http(s) or ws(s) URL (no spaces, quotes or backslashes)",
)
header_name: Final = rule(
    lambda name: HEADER_NAME.fullmatch(name), "{value!r} is not an HTTP header name (RFC 9110 token)"
)


def is_protocol_header(name: str) -> bool:
    lower = name.lower()
    return lower in PROTOCOL_HEADERS or lower.startswith(PROTOCOL_PREFIXES)


def _format(placeholder: str) -> Validator:
    def passes(text: str) -> bool:
        rest = text.replace(placeholder, "", 1)
        return placeholder in text and placeholder not in rest and "{" not in rest and "}" not in rest

    shown = placeholder.replace("{", "{{").replace("}", "}}")  # rule() formats the reason
    reason = f"{{value!r}} must hold {shown} once, and no other braces"
    return rule(lambda text: passes(text) and _VISIBLE.fullmatch(text), reason + " (visible ASCII only)")


def _scope_tokens(_instance: object, _attribute: object, value: str) -> None:
    """Space-separated scope tokens (RFC 6749 3.3), at least one."""
    if not value.split():
        raise ValueError("must name at least one scope")
    for item in value.split():
        scope_token(None, None, item)


class AuthKind(enum.StrEnum):
    STATIC = "static"  # a secret, in a header of every request
    CLIENT_CREDENTIALS = "client_credentials"  # the gateway's own token (RFC 6749 4.4)
    TOKEN_EXCHANGE = "token_exchange"  # the caller's token exchanged for the backend's (RFC 8693)


class ClientAuthMethod(enum.StrEnum):
    BASIC = "basic"  # client_secret_basic: HTTP Basic with the client id and secret
    POST = "post"  # client_secret_post: both in the form


class OwnRequests(enum.StrEnum):
    """What a token_exchange backend's requests that are no caller's carry (initialize, listings, pings)."""

    CLIENT_CREDENTIALS = "client_credentials"  # the gateway's own token, from the same endpoint and client
    NONE = "none"  # no credential


@attrs.frozen(kw_only=True)
class StaticAuth:
    """A secret the gateway sends in `header` (as `format` writes it) on every request to the backend."""

    kind: AuthKind = AuthKind.STATIC
    header: str = attrs.field(default="Authorization", validator=header_name)
    format: str = attrs.field(default="Bearer {secret}", validator=_format("{secret}"))
    secret: Secret = attrs.field(repr=False)

    def header_value(self) -> str:
        return self.format.replace("{secret}", self.secret.reveal(), 1)


@attrs.frozen(kw_only=True)
class TokenEndpointAuth:
    """The keys of both kinds that get tokens from a token endpoint (backends/token_broker.py's)."""

    kind: AuthKind
    token_url: str = attrs.field(validator=http_url)
    client_id: str = attrs.field(
        validator=rule(lambda text: _CLIENT_ID.fullmatch(text), "{value!r} must be visible ASCII, no spaces")
    )
    client_secret: Secret = attrs.field(repr=False)
    client_auth: ClientAuthMethod = ClientAuthMethod.BASIC
    scope: str | None = attrs.field(default=None, validator=attrs.validators.optional(_scope_tokens))
    audience: tuple[str, ...] = attrs.field(default=(), validator=every(not_blank))  # RFC 8693 audience
    resource: tuple[str, ...] = attrs.field(default=(), validator=every(resource_uri))  # RFC 8707 resource
    header: str = attrs.field(default="Authorization", validator=header_name)
    format: str = attrs.field(default="Bearer {token}", validator=_format("{token}"))
    # a failed request for a token is remembered this long: calls meanwhile get its error, not a new request
    negative_ttl_s: float = attrs.field(default=10.0, validator=at_least(0))
    # a token is used until this long before it expires (at most half its lifetime before)
    refresh_skew_s: float = attrs.field(default=30.0, validator=at_least(0))
    timeout_s: float = attrs.field(default=10.0, validator=positive)  # one request to the token endpoint
    max_cached: int = attrs.field(default=1024, validator=at_least(1))  # tokens kept, one per caller

    def header_value(self, token: str) -> str:
        return self.format.replace("{token}", token, 1)

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.scope.split()) if self.scope else ()

    @property
    def target(self) -> str:
        """What the tokens are for, as one string: the audience, the resources and the scope asked for."""
        return " ".join([*self.audience, *self.resource, *(f"scope:{s}" for s in self.scopes)])


@attrs.frozen(kw_only=True)
class ClientCredentialsAuth(TokenEndpointAuth):
    """The gateway's own token (OAuth 2 client_credentials), in every request to the backend."""

    kind: AuthKind = AuthKind.CLIENT_CREDENTIALS


@attrs.frozen(kw_only=True)
class TokenExchangeAuth(TokenEndpointAuth):
    """Each caller's verified token exchanged (RFC 8693) for one whose audience is the backend, in the
    requests of that caller's calls."""

    kind: AuthKind = AuthKind.TOKEN_EXCHANGE
    requested_token_type: str = attrs.field(default=ACCESS_TOKEN_TYPE, validator=not_blank)
    own_requests: OwnRequests = OwnRequests.CLIENT_CREDENTIALS

    def own(self) -> ClientCredentialsAuth:
        """The client_credentials settings of its own requests: the same endpoint, client and audience."""
        fields = {field.name for field in attrs.fields(ClientCredentialsAuth)} - {"kind"}
        return ClientCredentialsAuth(**{name: getattr(self, name) for name in fields})


BackendAuth = StaticAuth | ClientCredentialsAuth | TokenExchangeAuth
AUTH_KINDS: Final[dict[str, type[BackendAuth]]] = {
    AuthKind.STATIC: StaticAuth,
    AuthKind.CLIENT_CREDENTIALS: ClientCredentialsAuth,
    AuthKind.TOKEN_EXCHANGE: TokenExchangeAuth,
}
