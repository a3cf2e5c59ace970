"""Token verification as a pure function of the token, the issuer's rules and its key set: everything a
trusted issuer signs for this resource is accepted; every other token is refused with its reason."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from keys_support import ISSUER, RESOURCE, SigningIssuer
from oauth_support import hmac_token

from actors.config import JwtAuth
from actors.identity.principal import Principal, scopes_of
from actors.identity.verifier import verify_static
from actors.identity.verify import (
    MAX_TOKEN_BYTES,
    IssuerRules,
    KeySet,
    TokenRefusedError,
    UnknownKeyError,
    peek_issuer,
    verify,
)

RULES = IssuerRules(issuer=ISSUER, audiences=frozenset({RESOURCE}), algorithms=("RS256", "ES256"), leeway_s=5)


@pytest.fixture(scope="module")
def idp() -> SigningIssuer:
    return SigningIssuer()


@pytest.fixture(scope="module")
def keys(idp: SigningIssuer) -> KeySet:
    return KeySet.from_jwks(idp.jwks())


def test_a_token_of_the_trusted_issuer_for_this_resource_names_its_principal(
    idp: SigningIssuer, keys: KeySet
) -> None:
    principal = verify(idp.token(scope="tools:read notes:write"), RULES, keys)
    assert principal == Principal(ISSUER, "alice")
    assert principal.scopes == {"tools:read", "notes:write"}
    assert principal.claims["aud"] == RESOURCE
    ec_principal = verify(idp.token(kid="ec-1", algorithm="ES256", sub="bob"), RULES, keys)
    assert ec_principal.subject == "bob"


def test_a_token_listing_this_resource_among_other_audiences_is_accepted(
    idp: SigningIssuer, keys: KeySet
) -> None:
    assert verify(idp.token(aud=["https://other.example", RESOURCE]), RULES, keys).subject == "alice"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"aud": "https://other.example/mcp"}, "audience"),
        ({"exp": int(time.time()) - 60}, "expired"),
        ({"nbf": int(time.time()) + 600}, "not yet valid"),
        ({"iss": "https://elsewhere.example"}, "issuer"),
        ({"exp": None}, "exp"),
        ({"sub": None}, "subject"),
    ],
)
def test_a_token_with_a_wrong_claim_is_refused_naming_it(
    idp: SigningIssuer, keys: KeySet, overrides: dict[str, object], reason: str
) -> None:
    with pytest.raises(TokenRefusedError, match=f"(?i){reason}"):
        verify(idp.token(**overrides), RULES, keys)


def test_alg_none_is_refused(idp: SigningIssuer, keys: KeySet) -> None:
    unsigned = jwt.encode(idp.claims(), None, algorithm="none", headers={"kid": "rsa-1"})
    with pytest.raises(TokenRefusedError, match="algorithm 'none' is not accepted"):
        verify(unsigned, RULES, keys)


def test_an_hs256_token_signed_with_the_public_key_is_refused(idp: SigningIssuer, keys: KeySet) -> None:
    """Algorithm confusion: the published RSA key used as an HMAC secret."""
    header = {"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}
    forged = hmac_token(header, idp.claims(), idp.rsa_public_pem())
    with pytest.raises(TokenRefusedError, match="HS256"):
        verify(forged, RULES, keys)
    permissive = IssuerRules(issuer=ISSUER, audiences=frozenset({RESOURCE}), algorithms=("RS256", "HS256"))
    with pytest.raises(TokenRefusedError):  # even were HS256 allowed, an RSA key cannot verify it
        verify(forged, permissive, keys)


def test_a_key_used_for_another_algorithm_than_published_is_refused(idp: SigningIssuer, keys: KeySet) -> None:
    with pytest.raises(TokenRefusedError, match="published for RS256, the token says ES256"):
        verify(idp.token(kid="rsa-1", algorithm="ES256"), RULES, keys)
    with pytest.raises(TokenRefusedError, match="EC key cannot verify a RS256"):  # a key naming no alg
        verify(idp.token(kid="ec-1", algorithm="RS256"), RULES, keys)


def test_a_kid_the_issuer_never_published_is_its_own_error(idp: SigningIssuer, keys: KeySet) -> None:
    with pytest.raises(UnknownKeyError) as unknown:
        verify(idp.token(kid="made-up"), RULES, keys)
    assert unknown.value.kid == "made-up"


def test_a_token_signed_by_another_key_under_a_published_kid_is_refused(keys: KeySet) -> None:
    impostor = SigningIssuer()
    with pytest.raises(TokenRefusedError, match="Signature verification failed"):
        verify(impostor.token(), RULES, keys)


def test_a_huge_or_malformed_token_is_refused_unread(keys: KeySet) -> None:
    with pytest.raises(TokenRefusedError, match="longer than"):
        verify("a" * (MAX_TOKEN_BYTES + 1), RULES, keys)
    with pytest.raises(TokenRefusedError, match="longer than"):
        peek_issuer("a" * (MAX_TOKEN_BYTES + 1))
    for garbage in ("not-a-jwt", "a.b.c", "\x00\x01.\x7f.x"):
        with pytest.raises(TokenRefusedError, match="not a JWT"):
            verify(garbage, RULES, keys)


def test_a_jwks_keeps_only_public_signing_keys(idp: SigningIssuer) -> None:
    document = idp.jwks()
    document["keys"] += [
        {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},  # a published secret is no key
        {**document["keys"][0], "kid": "enc-1", "use": "enc"},
        {"kty": "XYZ", "kid": "odd"},
        "not an object",
    ]
    assert set(KeySet.from_jwks(document).by_kid) == {"rsa-1", "ec-1"}
    for bad in ({"keys": []}, {"keys": [{"kty": "oct", "k": "eA"}]}, [], {"keys": "x"}):
        with pytest.raises(ValueError):
            KeySet.from_jwks(bad)


def test_a_jwks_entry_holding_a_private_key_or_an_alg_not_a_string_is_left_out(idp: SigningIssuer) -> None:
    """A private key in a JWKS (a full JWK pasted where the public part belongs) is everyone's to sign with:
    it verifies nothing, and an RSA one would make every verification fail with no answer. An `alg` that is
    not a string leaves out its entry alone, never the whole set."""
    rsa_private = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp.rsa_key))
    ec_private = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(idp.ec_key))
    listed_alg = {**idp.jwks()["keys"][0], "kid": "listed", "alg": ["RS256"]}
    other = SigningIssuer()
    document = {
        "keys": [
            {**rsa_private, "kid": "rsa-1", "alg": "RS256"},
            {**ec_private, "kid": "ec-1"},
            listed_alg,
            {**other.jwks()["keys"][0], "kid": "good"},
        ]
    }
    keys = KeySet.from_jwks(document)
    assert set(keys.by_kid) == {"good"} and not keys.unnamed
    with pytest.raises(UnknownKeyError):
        verify(idp.token(kid="rsa-1"), RULES, keys)
    with pytest.raises(UnknownKeyError):
        verify(idp.token(kid="ec-1", algorithm="ES256"), RULES, keys)
    assert verify(other.token(kid="good"), RULES, keys).subject == "alice"


def test_a_subject_or_issuer_that_is_not_unicode_text_is_refused(idp: SigningIssuer, keys: KeySet) -> None:
    """JSON can escape a lone surrogate; no UTF-8 log, session key or store can hold one."""
    with pytest.raises(TokenRefusedError, match="subject is not Unicode text"):
        verify(idp.token(sub="ali\ud800ce"), RULES, keys)
    static = JwtAuth(key="k" * 32, algorithms=("HS256",), audience=None, issuer=None)
    exp = int(time.time()) + 300
    for claims in (
        {"sub": "\udc80"},
        {"iss": "\udc80", "sub": "bob"},
        {"client_id": "\ud800"},
    ):
        with pytest.raises(TokenRefusedError, match="not Unicode text"):
            verify_static(jwt.encode({**claims, "exp": exp}, static.key, "HS256"), static)


@pytest.mark.parametrize(
    "subject", [{}, {"sub": ""}, {"client_id": ""}, {"sub": 7, "client_id": ["x"]}], ids=repr
)
def test_a_token_that_names_no_subject_is_refused_whoever_signed_it(
    idp: SigningIssuer, keys: KeySet, subject: dict[str, object]
) -> None:
    """Tokens without a subject would all be one principal ("-"), each able to take over the others'
    sessions: refused with the reason, from the listener's own key and from a trusted issuer alike."""
    static = JwtAuth(key="k" * 32, algorithms=("HS256",), audience=None, issuer=None)
    claims = {"exp": int(time.time()) + 300, **subject}
    with pytest.raises(TokenRefusedError, match=r"[Ss]ubject"):  # PyJWT's own words for a sub of 7
        verify_static(hmac_token({"alg": "HS256", "typ": "JWT"}, claims, static.key.encode()), static)
    with pytest.raises(TokenRefusedError, match=r"[Ss]ubject"):
        verify(idp.token(**{"sub": None, **subject}), RULES, keys)
    named = verify_static(jwt.encode({"sub": "alice", "exp": claims["exp"]}, static.key, "HS256"), static)
    assert named == Principal(None, "alice")
    assert verify(idp.token(sub=None, client_id="a-service"), RULES, keys).subject == "a-service"


def test_principals_are_the_same_by_issuer_and_subject_whatever_their_scopes() -> None:
    assert Principal("i", "s", frozenset({"a"})) == Principal("i", "s", frozenset({"b"}))
    assert Principal("i", "s") != Principal("j", "s")
    assert scopes_of({"scope": "a b  c"}) == {"a", "b", "c"}
    assert scopes_of({"scp": ["a", "b"]}) == {"a", "b"}
    assert scopes_of({"scope": 7}) == frozenset() and scopes_of({"scp": ["a", 1]}) == frozenset()
