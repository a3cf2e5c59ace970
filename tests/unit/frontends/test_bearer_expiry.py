"""When a WebSocket session's token stops being good: its exp, plus the issuer's leeway for a trusted
issuer's token (none for a listener's own key, as PyJWT checks those); no expiry when exp is missing or is
not a finite number."""

from __future__ import annotations

from actors.frontends.bearer import BearerRules
from actors.identity.keys import IssuerKeys
from actors.identity.principal import Principal
from actors.identity.verifier import Verifier
from actors.identity.verify import IssuerRules

ISSUER = "https://idp.example"


def rules() -> BearerRules:
    verifier = Verifier()
    verifier.issuers = {
        ISSUER: (IssuerRules(issuer=ISSUER, audiences=frozenset({"aud"}), leeway_s=30.0), IssuerKeys(ISSUER))
    }
    return BearerRules(None, verifier, {})


def test_a_tokens_expiry_is_its_exp_and_its_issuers_leeway() -> None:
    bearer = rules()
    assert bearer.expires_at(Principal(ISSUER, "alice", claims={"exp": 1_000})) == 1_030.0
    assert bearer.expires_at(Principal(None, "bob", claims={"exp": 1_000})) == 1_000.0  # a listener's key
    assert bearer.expires_at(Principal("https://other.example", "eve", claims={"exp": 5})) == 5.0
    for exp in (None, "1000", True, float("inf"), float("nan"), [1000], 10**400):
        assert bearer.expires_at(Principal(ISSUER, "carol", claims={"exp": exp})) is None, exp
    assert bearer.expires_at(Principal(ISSUER, "dave")) is None and bearer.expires_at(None) is None
