"""Bearer-token verification: a pure function of a token, the issuer's rules and its key set.

Only what the issuer's rules allow is accepted: its exact `iss`, an `aud` in its list, an algorithm from its
allow-list (never `none`, never an HMAC algorithm for an issuer that publishes public keys), a key it
published under the token's `kid`, `exp` present and not past (with leeway), `nbf` reached. An unknown
`kid` is its own error so that the caller may have the key set refetched once and try again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import jwt

from actors.identity.principal import Principal, scopes_of
from actors.protocol.codec import clip

MAX_TOKEN_BYTES: Final = 16 * 1024  # real access tokens are 1-4 KB; a bigger one is refused unread
ASYMMETRIC: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
REQUIRED_CLAIMS: Final = ("exp", "iss")


class TokenRefusedError(Exception):
    """Why a token is refused, safe to log and to send (no token, control characters escaped)."""


class UnknownKeyError(TokenRefusedError):
    """The token names a key (`kid`) its issuer's key set does not hold."""

    def __init__(self, issuer: str, kid: str) -> None:
        super().__init__(f"issuer {clip(issuer)} published no key {clip(kid)!r}")
        self.kid = kid


@attrs.frozen(kw_only=True)
class IssuerRules:
    """What a token from one trusted issuer must satisfy."""

    issuer: str
    audiences: frozenset[str]
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_s: float = 30.0


KEY_TYPES: Final = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}  # algorithm prefix -> JWK kty


@attrs.frozen
class PublishedKey:
    """One public key as the issuer published it: the key, its type and the algorithm it names, if any."""

    key: jwt.PyJWK = attrs.field(repr=False)
    kty: str
    alg: str | None


@attrs.frozen
class KeySet:
    """One issuer's published public keys (a JWKS), by `kid`; keys without one in `unnamed`."""

    by_kid: Mapping[str, PublishedKey] = attrs.field(factory=dict)
    unnamed: tuple[PublishedKey, ...] = ()

    @classmethod
    def from_jwks(cls, document: Any) -> KeySet:
        """The signing keys of a JWKS document; keys for encryption, of a kind PyJWT cannot use, symmetric
        (`oct`: a published secret is no secret) or private (`d`: a published private key signs for anyone)
        are left out. ValueError when none is left."""
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError("not a JWKS document (an object with a 'keys' array)")
        by_kid: dict[str, PublishedKey] = {}
        unnamed: list[PublishedKey] = []
        for entry in document["keys"]:
            if not _public_signing_entry(entry):
                continue
            try:
                key = PublishedKey(jwt.PyJWK(entry), str(entry["kty"]), entry.get("alg"))
            except (jwt.PyJWTError, KeyError):
                continue
            kid = entry.get("kid")
            if isinstance(kid, str):
                by_kid[kid] = key
            else:
                unnamed.append(key)
        if not by_kid and not unnamed:
            raise ValueError("the JWKS holds no usable signing key")
        return cls(by_kid, tuple(unnamed))

    def __len__(self) -> int:
        return len(self.by_kid) + len(self.unnamed)


def _public_signing_entry(entry: object) -> bool:
    """Whether a JWKS entry may be a public signing key: an object for `sig` use, not `oct`, without the
    private member `d`, its `alg` (if any) a string (PyJWT looks it up in a table: a list would raise)."""
    return (
        isinstance(entry, dict)
        and entry.get("use", "sig") == "sig"
        and entry.get("kty") != "oct"
        and "d" not in entry
        and isinstance(entry.get("alg", ""), str)
    )


def peek_issuer(token: str) -> str | None:
    """The `iss` the token claims, unverified: only to choose whose rules and keys verify it."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRefusedError(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenRefusedError(f"not a JWT: {clip(str(exc))}") from None
    issuer = claims.get("iss")
    return issuer if isinstance(issuer, str) else None


def verify(token: str, rules: IssuerRules, keys: KeySet) -> Principal:
    """The principal of a token from `rules.issuer`, signed with a key of `keys`; TokenRefusedError (or
    UnknownKeyError) with the reason otherwise."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRefusedError(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise TokenRefusedError(f"not a JWT: {clip(str(exc))}") from None
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in rules.algorithms:
        allowed = ", ".join(rules.algorithms)
        raise TokenRefusedError(f"algorithm {clip(str(algorithm))!r} is not accepted (accepted: {allowed})")
    key = _key_for(header.get("kid"), algorithm, rules.issuer, keys)
    try:
        claims = jwt.decode(
            token,
            key.key.key,
            algorithms=[algorithm],
            audience=sorted(rules.audiences),
            issuer=rules.issuer,
            leeway=rules.leeway_s,
            options={"require": list(REQUIRED_CLAIMS), "verify_aud": True},
        )
    except jwt.PyJWTError as exc:
        raise TokenRefusedError(clip(str(exc))) from None
    return principal_of(claims, rules.issuer)


def _key_for(kid: object, algorithm: str, issuer: str, keys: KeySet) -> PublishedKey:
    """The published key a token names; a key of another type, or published for another algorithm, is
    refused (algorithm confusion)."""
    if kid is not None and not isinstance(kid, str):
        raise TokenRefusedError("the token's kid is not a string")
    if kid is None:
        if len(keys) != 1:
            raise TokenRefusedError("the token names no key (kid) and the issuer publishes several")
        key = next(iter(keys.by_kid.values()), None) or keys.unnamed[0]
    else:
        found = keys.by_kid.get(kid)
        if found is None:
            raise UnknownKeyError(issuer, kid)
        key = found
    if key.alg is not None and key.alg != algorithm:
        raise TokenRefusedError(f"the key is published for {clip(key.alg)}, the token says {algorithm}")
    if KEY_TYPES.get(algorithm[:2]) != key.kty:
        raise TokenRefusedError(f"a {clip(key.kty)} key cannot verify a {algorithm} token")
    return key


def principal_of(claims: Mapping[str, Any], issuer: str | None) -> Principal:
    """The principal a verified payload names: `sub`, else the `client_id` of a client acting for itself."""
    subject = subject_of(claims)
    if subject is None:
        raise TokenRefusedError(
            "the token names no subject: a non-empty string sub (or client_id) is required"
        )
    check_text(issuer, subject)
    return Principal(issuer, subject, scopes_of(claims), claims)


def subject_of(claims: Mapping[str, Any]) -> str | None:
    """`sub`, else `client_id`, when it is a string that is not empty."""
    for name in ("sub", "client_id"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def check_text(issuer: str | None, subject: str) -> None:
    """TokenRefusedError unless issuer and subject are Unicode text. JSON can escape a lone surrogate, which
    no UTF-8 can carry: a principal keys sessions, limits and logs, and would fail in each of them (nor may
    two such subjects be made one by replacing it)."""
    for what, value in (("issuer", issuer), ("subject", subject)):
        if value is not None and not _is_text(value):
            raise TokenRefusedError(f"the token's {what} is not Unicode text (it holds a lone surrogate)")


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
