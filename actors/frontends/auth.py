"""Admission checks shared by the network frontends: bearer tokens (JWT), the principal a verified token
names, and the refusal they raise.

The token itself is never logged; only its subject is, once it is verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import jwt

from actors.config import JwtAuth


class Refused(Exception):
    """A connection or request that may not go on: the HTTP status, why, and headers for the answer."""

    def __init__(self, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or []


@attrs.frozen
class Principal:
    """Who a verified token names: its issuer (`iss`, when it has one) and subject (`sub`, or "-")."""

    issuer: str | None
    subject: str
    # the verified token's claims: what policy rules read (never logged); not part of who it is
    claims: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


def check_bearer(headers: dict[str, str], auth: JwtAuth) -> Principal:
    """The token's principal, or Refused(401). `headers` has lower-case names."""
    challenge = [(b"www-authenticate", b'Bearer realm="mcp-gateway"')]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, "a bearer token is required (Authorization: Bearer ...)", challenge)
    try:
        claims = jwt.decode(
            token.strip(),
            auth.key,
            algorithms=list(auth.algorithms),
            audience=auth.audience,
            issuer=auth.issuer,
            options={"verify_aud": auth.audience is not None},
        )
    except jwt.PyJWTError as exc:
        invalid = [(b"www-authenticate", b'Bearer realm="mcp-gateway", error="invalid_token"')]
        raise Refused(401, f"invalid bearer token: {exc}", invalid) from None
    subject, issuer = claims.get("sub"), claims.get("iss")
    return Principal(
        issuer if isinstance(issuer, str) and issuer else None,
        subject if isinstance(subject, str) and subject else "-",
        claims,
    )
