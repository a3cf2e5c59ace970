"""The principal: who a request comes from, as the gateway's sessions, limits, policy and audit key it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from actors.protocol.on_behalf import CallerToken


def _frozen_claims(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(claims))


@attrs.frozen
class Principal:
    """A verified token's issuer (`iss`, None for a static key's token without one) and subject (`sub`), or
    the configured principal of a stdio session. Two principals are the same when issuer and subject are:
    a refreshed token with other scopes is still the same principal (its session stays its own).

    `scopes` are what the token grants (`scope`/`scp`); `claims` the whole verified payload, for policy;
    `token` the verified token itself, which a frontend attaches for the request it came with (`bearing`)
    and a token exchange alone reveals."""

    issuer: str | None
    subject: str
    scopes: frozenset[str] = attrs.field(default=frozenset(), eq=False)
    claims: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_claims, eq=False, repr=False)
    token: CallerToken | None = attrs.field(default=None, eq=False, repr=False)

    def bearing(self, token: str) -> Principal:
        """This principal with the token it was verified from, for the request that carried it."""
        bearer = CallerToken(self.issuer, self.subject, expiry_of(self.claims), token=token)
        return attrs.evolve(self, token=bearer)

    def lacks(self, needed: frozenset[str]) -> frozenset[str]:
        """The scopes of `needed` this principal was not granted."""
        return needed - self.scopes


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: `scope` (RFC 9068, space-separated) or `scp` (a list, or a string).
    Anything of another shape grants nothing."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item for item in value if item and " " not in item)
    return frozenset()


def expiry_of(claims: Mapping[str, Any]) -> float | None:
    """A token's `exp` as Unix time, None when it names none a float can hold."""
    exp = claims.get("exp")
    if type(exp) not in (int, float):
        return None
    try:
        seconds = float(exp)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None
