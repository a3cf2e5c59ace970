"""The token broker (backends/token_broker.py) against the test's security token service over real HTTP,
on a clock the test moves: one request however many wait; a token handed out until shortly before it
expires and never past its caller's token; a failure remembered negative_ttl_s (the endpoint's for every
caller, a refusal for its own); a token a backend refused asked anew; the cache bounded; every request an
audit row; every token granted known to the redactor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import jwt
import pytest
import trio
import trio.testing
from sts_fixture import CLIENT_ID, CLIENT_SECRET, Sts, security_token_service

from actors.backends import token_broker
from actors.backends.token_broker import TokenBroker, TokenUnavailableError
from actors.config.auth_schema import ClientCredentialsAuth, TokenExchangeAuth
from actors.config.secret import Secret, SecretSource
from actors.middleware.exchange_audit import TokenRequestRow
from actors.protocol.on_behalf import CallerToken
from actors.runtime.redact import redact

NOW = 1_000_000.0


@attrs.define
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


def caller(
    subject: str = "alice", expires_in_s: float | None = 3600, clock: Clock | None = None
) -> CallerToken:
    at = clock.now if clock is not None else NOW
    token = jwt.encode(
        {"sub": subject, "iss": "https://idp.example", "exp": 2_000_000_000}, "k" * 32, "HS256"
    )
    return CallerToken(
        "https://idp.example", subject, None if expires_in_s is None else at + expires_in_s, token=token
    )


def exchange_auth(url: str, **changes: Any) -> TokenExchangeAuth:
    secret = Secret(SecretSource.VALUE, "test", value=CLIENT_SECRET)
    return TokenExchangeAuth(
        token_url=url, client_id=CLIENT_ID, client_secret=secret, audience=("tickets",), **changes
    )


@attrs.define
class Running:
    sts: Sts
    broker: TokenBroker
    clock: Clock
    rows: list[TokenRequestRow]


@asynccontextmanager
async def running(**changes: Any) -> AsyncIterator[Running]:
    clock, rows = Clock(), []

    async def audit(row: TokenRequestRow) -> None:
        rows.append(row)

    async with security_token_service() as sts, trio.open_nursery() as nursery:
        broker = TokenBroker(
            backend="tickets", auth=exchange_auth(sts.url, **changes), audit=audit, clock=clock
        )
        await nursery.start(broker.run)
        yield Running(sts, broker, clock, rows)
        nursery.cancel_scope.cancel()


async def test_fifty_waiting_callers_make_one_request() -> None:
    async with running() as r:
        r.sts.gate = trio.Event()
        arrived = r.sts.arrived
        alice, got = caller(), []

        async def ask() -> None:
            got.append(await r.broker.token_for(alice))

        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(ask)
            await arrived.wait()
            await trio.testing.wait_all_tasks_blocked()  # all 50 wait on the one request
            assert len(r.sts.requests) == 1
            r.sts.gate.set()
    assert len(got) == 50 and len({minted.token for minted in got}) == 1
    assert len(r.sts.exchanges()) == 1 and len(r.rows) == 1
    assert got[0].header_value == f"Bearer {got[0].token}"


async def test_a_token_is_handed_out_until_shortly_before_it_expires() -> None:
    async with running(refresh_skew_s=30) as r:
        r.sts.expires_in = 100
        first = await r.broker.token_for(caller())
        assert first.serve_until == NOW + 70
        r.clock.now = NOW + 69
        assert await r.broker.token_for(caller()) is first
        r.clock.now = NOW + 70
        second = await r.broker.token_for(caller())
    assert second.token != first.token and len(r.sts.exchanges()) == 2
    assert [row.cause for row in r.rows] == ["first", "expired"]


async def test_a_short_token_is_used_at_least_half_its_lifetime() -> None:
    async with running(refresh_skew_s=300) as r:
        r.sts.expires_in = 60
        assert (await r.broker.token_for(caller())).serve_until == NOW + 30


async def test_the_callers_own_expiry_caps_the_cached_lifetime() -> None:
    async with running() as r:
        r.sts.expires_in = 3600
        minted = await r.broker.token_for(caller(expires_in_s=20))
        assert minted.serve_until == NOW + 20
        assert r.rows[0].lifetime_s == 20
        r.clock.now = NOW + 20
        with pytest.raises(TokenUnavailableError, match="the caller's token has expired"):
            await r.broker.token_for(caller(expires_in_s=0, clock=r.clock))
        refreshed = await r.broker.token_for(caller(expires_in_s=600, clock=r.clock))  # a new token of alice
    assert refreshed.token != minted.token and len(r.sts.exchanges()) == 2


async def test_an_endpoint_down_is_asked_at_most_once_per_negative_ttl_for_every_caller() -> None:
    async with running(negative_ttl_s=10) as r:
        r.sts.fail_status = 500
        errors = []
        for when, who in ((0, "alice"), (5, "alice"), (9.9, "bob")):
            r.clock.now = NOW + when
            with pytest.raises(TokenUnavailableError) as caught:
                await r.broker.token_for(caller(who, clock=r.clock))
            errors.append(str(caught.value))
        assert len(r.sts.requests) == 1
        r.clock.now = NOW + 10
        r.sts.fail_status = None
        assert await r.broker.token_for(caller("bob", clock=r.clock))
    assert len(r.sts.requests) == 2
    assert errors[0] == f"no token for it: {r.sts.url} answered HTTP 500"
    assert errors[1:] == [f"{errors[0]} (asked again after 10s)"] * 2
    assert [(row.outcome, row.status) for row in r.rows] == [("failed", 500), ("ok", 200)]


async def test_a_refusal_is_remembered_for_its_caller_only() -> None:
    async with running(negative_ttl_s=10) as r:
        r.sts.refuse = "invalid_grant"
        with pytest.raises(TokenUnavailableError, match="refused: invalid_grant: refused by the test"):
            await r.broker.token_for(caller("alice"))
        r.sts.refuse = None
        with pytest.raises(TokenUnavailableError, match=r"invalid_grant.*\(asked again after 10s\)"):
            await r.broker.token_for(caller("alice"))
        assert await r.broker.token_for(caller("bob"))  # another caller is asked for
    assert [request["subject"] for request in r.sts.requests] == ["alice", "bob"]
    assert r.rows[0].outcome == "refused" and r.rows[0].status == 400


async def test_without_negative_ttl_every_call_asks_again() -> None:
    async with running(negative_ttl_s=0) as r:
        r.sts.fail_status = 503
        for _ in range(3):
            with pytest.raises(TokenUnavailableError):
                await r.broker.token_for(caller())
    assert len(r.sts.requests) == 3


async def test_a_token_the_backend_refused_is_asked_anew_once() -> None:
    async with running() as r:
        first = await r.broker.token_for(caller())
        assert r.broker.refused(first)
        assert not r.broker.refused(first)  # a second call's 401 of the same token: nothing more
        second = await r.broker.token_for(caller())
        assert await r.broker.token_for(caller()) is second
    assert [row.cause for row in r.rows] == ["first", "refused_by_backend"]


async def test_the_cache_is_bounded_and_one_entry_per_caller() -> None:
    async with running(max_cached=2) as r:
        for who in ("alice", "alice", "bob", "carol", "alice"):
            await r.broker.token_for(caller(who))
    assert len(r.broker.cache) == 2
    assert [(row.subject, row.cause) for row in r.rows] == [
        ("alice", "first"),
        ("bob", "first"),
        ("carol", "first"),
        ("alice", "evicted"),
    ]


async def test_requests_under_way_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_broker, "MAX_PENDING", 1)
    async with running() as r:
        r.sts.gate = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(r.broker.token_for, caller("alice"))
            await r.sts.arrived.wait()
            with pytest.raises(TokenUnavailableError, match="1 token requests are under way for it"):
                await r.broker.token_for(caller("bob"))
            r.sts.gate.set()


async def test_the_gateways_own_token_and_what_the_audit_and_the_redactor_know() -> None:
    async with running() as r:
        own = await r.broker.token_for(None)
        assert await r.broker.token_for(None) is own
        exchanged = await r.broker.token_for(caller())
    assert [request["grant_type"] for request in r.sts.requests] == [
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:token-exchange",
    ]
    assert (r.rows[0].grant_type, r.rows[0].issuer, r.rows[0].subject) == (
        "client_credentials",
        r.sts.url,
        CLIENT_ID,
    )
    assert (r.rows[1].grant_type, r.rows[1].issuer, r.rows[1].subject) == (
        "token_exchange",
        "https://idp.example",
        "alice",
    )
    assert not any(own.token in repr(row) or exchanged.token in repr(row) for row in r.rows)
    assert redact(f"got {exchanged.token}") == "got [REDACTED:token:tickets]"


async def test_client_credentials_alone_needs_no_caller() -> None:
    async with security_token_service() as sts, trio.open_nursery() as nursery:
        secret = Secret(SecretSource.VALUE, "test", value=CLIENT_SECRET)
        auth = ClientCredentialsAuth(
            token_url=sts.url, client_id=CLIENT_ID, client_secret=secret, client_auth="post"
        )  # type: ignore[arg-type]
        broker = TokenBroker(backend="b", auth=auth)
        await nursery.start(broker.run)
        minted = await broker.token_for(None)
        nursery.cancel_scope.cancel()
    assert minted.token == sts.granted[0] and sts.requests[0]["client"] == CLIENT_ID
