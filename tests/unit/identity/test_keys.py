"""An issuer's keys kept fresh: its keeper fetches the JWKS, fetches it again when a token names a key the set
lacks (at most once per cooldown), keeps the last good set when the source fails, and is restarted with
backoff by its supervisor; verified tokens are cached until they expire, failures never."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio
import trio.testing
from keys_support import ISSUER, RESOURCE, SigningIssuer

from actors.identity.cache import VerifiedTokens
from actors.identity.fetch import max_age_s, metadata_urls
from actors.identity.keys import IssuerKeys, JwksSource, KeysKeeper, lifetime_s
from actors.identity.principal import Principal
from actors.identity.verifier import Verifier
from actors.identity.verify import IssuerRules, KeySet, TokenRefusedError, UnknownKeyError
from actors.runtime.supervisor import (
    ChildEvent,
    ChildExitError,
    ChildRestarting,
    ChildSpec,
    ChildStarted,
    RestartPolicy,
    supervise_child,
)

RULES = IssuerRules(issuer=ISSUER, audiences=frozenset({RESOURCE}))


def publish(path: Path, *issuers: SigningIssuer, kids: tuple[str, ...] = ("rsa-1",)) -> None:
    keys = [dict(issuer.jwks()["keys"][0], kid=kid) for issuer, kid in zip(issuers, kids, strict=True)]
    path.write_text(json.dumps({"keys": keys}))


async def test_an_unknown_kid_has_the_set_fetched_once_per_cooldown(tmp_path: Path) -> None:
    old, new = SigningIssuer(), SigningIssuer()
    jwks = tmp_path / "jwks.json"
    publish(jwks, old, kids=("old",))
    keys = IssuerKeys(ISSUER, kid_cooldown_s=30.0)
    verifier = Verifier(issuers={ISSUER: (RULES, keys)})
    keeper = KeysKeeper(JwksSource(jwks_file=jwks, refresh_min_s=3600, refresh_max_s=3600), keys)
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run)
        assert keys.current is not None and set(keys.current.by_kid) == {"old"} and keys.fetches == 1
        assert (await verifier.principal_of(old.token(kid="old"))).subject == "alice"
        publish(jwks, old, new, kids=("old", "new"))  # the issuer rotates: a new key, the old one kept
        assert (await verifier.principal_of(new.token(kid="new", sub="bob"))).subject == "bob"
        assert keys.fetches == 2
        for kid in ("random-1", "random-2", "random-3"):  # within the cooldown: no fetch at all
            with pytest.raises(UnknownKeyError):
                await verifier.principal_of(new.token(kid=kid, sub=kid))
        assert keys.fetches == 2
        nursery.cancel_scope.cancel()


async def test_the_last_good_set_stays_when_the_source_fails(tmp_path: Path) -> None:
    issuer = SigningIssuer()
    keys = IssuerKeys(ISSUER)
    keys.replace(KeySet.from_jwks(issuer.jwks()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text("<html>down for maintenance</html>")
    with pytest.raises(ChildExitError, match="the last good set stays in use"):
        await KeysKeeper(JwksSource(jwks_file=jwks), keys).run()
    assert keys.current is not None and set(keys.current.by_kid) == {"rsa-1", "ec-1"}
    assert keys.failures == 1
    verifier = Verifier(issuers={ISSUER: (RULES, keys)})
    assert (await verifier.principal_of(issuer.token())).subject == "alice"


async def test_a_failing_keeper_is_restarted_with_backoff_until_the_source_answers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text("{}")
    keys = IssuerKeys(ISSUER)
    policy = RestartPolicy(max_restarts=10, window_s=600, backoff_initial_s=1.0, backoff_max_s=8.0)
    spec = ChildSpec(ISSUER, KeysKeeper(JwksSource(jwks_file=jwks), keys).run, policy, kind="issuer")
    send, events = trio.open_memory_channel[ChildEvent](0)
    delays = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise_child, spec, send)
        async for event in events:
            if isinstance(event, ChildRestarting):
                delays.append(event.delay_s)
                if len(delays) == 3:
                    publish(jwks, SigningIssuer())
            elif isinstance(event, ChildStarted):
                break
        nursery.cancel_scope.cancel()
    assert len(delays) == 3 and delays[0] < delays[1] < delays[2]  # 1, 2, 4 s, jittered by 20 %
    assert keys.failures == 3 and keys.current is not None


def test_cache_control_sets_the_lifetime_within_the_bounds() -> None:
    source = JwksSource(refresh_min_s=60, refresh_max_s=3600, refresh_default_s=600)
    assert max_age_s("public, max-age=300") == 300 and max_age_s('max-age="120"') == 120
    assert max_age_s("no-store") == 0 and max_age_s(None) is None and max_age_s("private") is None
    assert max_age_s("max-age=99999999999") is None  # more digits than any sane lifetime: ignored
    assert lifetime_s(300.0, source) == 300
    assert lifetime_s(0.0, source) == 60  # no-store would mean a fetch per token: the floor holds
    assert lifetime_s(10**9, source) == 3600
    assert lifetime_s(None, source) == 600


def test_metadata_is_looked_for_where_rfc_8414_and_oidc_put_it() -> None:
    assert metadata_urls("https://idp.example") == [
        "https://idp.example/.well-known/oauth-authorization-server",
        "https://idp.example/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://idp.example/realms/mcp") == [
        "https://idp.example/.well-known/oauth-authorization-server/realms/mcp",
        "https://idp.example/.well-known/openid-configuration/realms/mcp",
        "https://idp.example/realms/mcp/.well-known/openid-configuration",
    ]


async def test_an_untrusted_issuer_is_refused_and_failures_are_not_cached() -> None:
    stranger = SigningIssuer(issuer="https://stranger.example")
    keys = IssuerKeys(ISSUER)
    keys.replace(KeySet.from_jwks(SigningIssuer().jwks()))
    verifier = Verifier(issuers={ISSUER: (RULES, keys)})
    for n in range(20):
        with pytest.raises(TokenRefusedError, match="not trusted"):
            await verifier.principal_of(stranger.token(sub=f"user-{n}"))
    assert len(verifier.cache) == 0


async def test_a_verified_token_is_not_verified_again_until_it_expires() -> None:
    issuer = SigningIssuer()
    keys = IssuerKeys(ISSUER)
    keys.replace(KeySet.from_jwks(issuer.jwks()))
    verifier = Verifier(issuers={ISSUER: (RULES, keys)})
    token = issuer.token()
    first = await verifier.principal_of(token)
    keys.replace(KeySet.from_jwks(SigningIssuer().jwks()))  # were it verified again, it would fail
    assert await verifier.principal_of(token) is first


def test_the_cache_forgets_expired_tokens_and_keeps_to_its_bound() -> None:
    cache = VerifiedTokens(max_entries=3)
    now = int(time.time())
    for n in range(5):
        cache.put(f"token-{n}", Principal("i", f"s{n}", claims={"exp": now + 60}))
    assert len(cache) == 3 and cache.get("token-0") is None and cache.get("token-4") is not None
    cache.put("stale", Principal("i", "s", claims={"exp": now - 1}))
    cache.put("no-exp", Principal("i", "s"))
    assert cache.get("stale") is None and cache.get("no-exp") is None
