"""[[NAME.auth.issuers]] and the OAuth resource-server keys of [NAME.auth]: the identity providers whose
tokens a listener accepts, what it advertises in its Protected Resource Metadata (RFC 9728), and which
scopes a tool needs.

Scopes and URLs end up inside a WWW-Authenticate header, so only their RFC 6749 / RFC 3986 characters are
accepted: no quote, backslash, space or control character can reach a header from the config.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Final

import attrs

from actors.config.checks import every, not_below, not_blank, rule

ASYMMETRIC_ALGORITHMS: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_SCOPE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 scope-token
_URL: Final = re.compile(r"(https?|wss?)://[\x21\x23-\x5b\x5d-\x7e]+")  # no quote, backslash, space, control


def is_url(value: str, schemes: tuple[str, ...] = ("http", "https")) -> bool:
    return bool(_URL.fullmatch(value)) and value.split(":", 1)[0] in schemes


scope_token: Final = rule(
    lambda s: _SCOPE.fullmatch(s), "{value!r} is not a scope (visible ASCII, no quote, space or backslash)"
)
http_url: Final = rule(is_url, "{value!r} is not an http(s) URL (no spaces, quotes or backslashes)")
resource_url: Final = rule(
    lambda url: is_url(url, ("http", "https", "ws", "wss")) and not url.endswith("/"),
    "{value!r} is not the listener's public URL (http(s) or ws(s), path included, no trailing slash)",
)


class InsufficientScope(enum.StrEnum):
    """What a token whose scopes do not cover a tool meets."""

    HIDE = "hide"  # the tool is not listed to it (a call of it is refused as unknown)
    REFUSE = "refuse"  # also: an HTTP call of it gets 403 insufficient_scope, naming the missing scopes


@attrs.frozen(kw_only=True)
class IssuerTable:
    """[[NAME.auth.issuers]]: one trusted identity provider."""

    issuer: str = attrs.field(validator=http_url)  # its exact `iss`
    jwks_url: str | None = attrs.field(default=None, validator=attrs.validators.optional(http_url))
    jwks_file: Path | None = None  # a JWKS document, relative to the config file
    # accepted `aud` values; none given: the listener's resource URL
    audiences: tuple[str, ...] = ()
    # opt-in: also accept these OAuth client ids as `aud` (Claude Code sends no RFC 8707 resource)
    client_id_audiences: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = attrs.field(
        default=("RS256", "ES256"),
        validator=every(
            rule(
                lambda a: a in ASYMMETRIC_ALGORITHMS,
                "{value!r} is not an asymmetric JWS algorithm ("
                + ", ".join(sorted(ASYMMETRIC_ALGORITHMS))
                + ")",
            )
        ),
    )
    leeway_s: float = attrs.field(
        default=30.0, validator=rule(lambda s: 0 <= s <= 300, "must be between 0 and 300")
    )
    # the JWKS is fetched again after its Cache-Control max-age, kept between these bounds
    refresh_min_s: float = attrs.field(default=60.0, validator=rule(lambda s: s >= 1, "must be 1 or more"))
    refresh_max_s: float = attrs.field(default=3600.0, validator=not_below("refresh_min_s"))
    # a token naming a key the set lacks makes it fetched again, at most once per this long
    kid_cooldown_s: float = attrs.field(default=30.0, validator=rule(lambda s: s >= 0, "must be 0 or more"))


@attrs.frozen(kw_only=True)
class ResourceServerKeys:
    """The OAuth keys of [NAME.auth] besides the static key and its issuers."""

    # the listener's public URL (behind a proxy); unset: its own URL, as bound
    resource: str | None = attrs.field(default=None, validator=attrs.validators.optional(resource_url))
    scopes_supported: tuple[str, ...] = attrs.field(default=(), validator=every(scope_token))
    required_scopes: tuple[str, ...] = attrs.field(
        default=(), validator=every(scope_token)
    )  # for any request
    # tool public name -> the scopes a token needs to see and call it
    tool_scopes: dict[str, tuple[str, ...]] = attrs.field(
        factory=dict,
        hash=False,
        validator=every(
            rule(
                lambda scopes: all(_SCOPE.fullmatch(s) for s in scopes),
                "{value!r} holds something that is not a scope",
            )
        ),
    )
    insufficient_scope: InsufficientScope = InsufficientScope.HIDE


@attrs.frozen(kw_only=True)
class OAuthSettings:
    """[NAME.auth] as a resource server, loaded (the JWKS files' paths made absolute)."""

    issuers: tuple[IssuerTable, ...]
    resource: str | None = None
    scopes_supported: tuple[str, ...] = ()
    required_scopes: tuple[str, ...] = ()
    tool_scopes: dict[str, frozenset[str]] = attrs.field(factory=dict, hash=False)
    insufficient_scope: InsufficientScope = InsufficientScope.HIDE


@attrs.frozen(kw_only=True)
class StdioPrincipal:
    """[stdio]: who the stdio session's client is. stdio carries no token (the MCP spec: its credentials
    come from the environment), so its principal is configured, and limits, policy, the audit and the
    listeners' tool_scopes apply to it as to a token's."""

    subject: str = attrs.field(validator=not_blank)
    issuer: str | None = None  # e.g. "local"; none: like a static key's token without `iss`
    scopes: tuple[str, ...] = attrs.field(default=(), validator=every(scope_token))
