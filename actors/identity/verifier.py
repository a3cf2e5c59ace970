"""The bearer-token check of one listener: the trusted issuers' rules and key sets, the static key of
[NAME.auth] (an HS256 secret or a PEM public key) if any, and the cache of verified tokens."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import jwt

from actors.config import JwtAuth
from actors.identity.cache import VerifiedTokens
from actors.identity.keys import IssuerKeys
from actors.identity.principal import Principal
from actors.identity.verify import (
    MAX_TOKEN_BYTES,
    IssuerRules,
    TokenRefusedError,
    UnknownKeyError,
    peek_issuer,
    principal_of,
    verify,
)
from actors.protocol.codec import clip


@attrs.define(eq=False, kw_only=True)
class Verifier:
    """Owns: the cache of verified tokens. Reads: each issuer's key set (its keeper owns it)."""

    issuers: Mapping[str, tuple[IssuerRules, IssuerKeys]] = attrs.field(factory=dict)
    static: JwtAuth | None = None
    cache: VerifiedTokens = attrs.field(factory=VerifiedTokens)

    async def principal_of(self, token: str) -> Principal:
        """The token's principal; TokenRefusedError with the reason when it is not good here."""
        found = self.cache.get(token)
        if found is not None:
            return found
        issuer = peek_issuer(token)
        trusted = self.issuers.get(issuer) if issuer is not None else None
        if trusted is not None:
            principal = await _verify_with_refetch(token, *trusted)
        elif self.static is not None:
            principal = verify_static(token, self.static)
        else:
            raise TokenRefusedError(f"the issuer {clip(str(issuer))!r} is not trusted here")
        self.cache.put(token, principal)
        return principal


async def _verify_with_refetch(token: str, rules: IssuerRules, keys: IssuerKeys) -> Principal:
    if not await keys.first_set():
        raise TokenRefusedError(f"the keys of issuer {clip(rules.issuer)} could not be fetched yet")
    try:
        return verify(token, rules, keys.current)
    except UnknownKeyError as exc:
        if not await keys.refetched_for(exc.kid):
            raise
    assert keys.current is not None
    return verify(token, rules, keys.current)


def verify_static(token: str, auth: JwtAuth) -> Principal:
    """A token signed with the listener's own key (HS256 secret, or a PEM public key). Like an issuer's, it
    must name its subject: tokens without one would all be the one principal, each able to use the others'
    sessions."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRefusedError(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        claims = jwt.decode(
            token,
            auth.key,
            algorithms=list(auth.algorithms),
            audience=auth.audience,
            issuer=auth.issuer,
            options={"verify_aud": auth.audience is not None},
        )
    except jwt.PyJWTError as exc:
        raise TokenRefusedError(clip(str(exc))) from None
    claimed = claims.get("iss")
    issuer = claimed if isinstance(claimed, str) and claimed else None
    return principal_of(claims, issuer)  # one without a subject is refused: it would be no one's, or all
