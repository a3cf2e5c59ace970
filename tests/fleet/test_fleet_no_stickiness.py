"""A fleet behind a balancer with no stickiness: whatever a client sends may land on any replica. Two
gateways share a real redis-server: two requests arriving together at a replica without a copy, and a
Redis that comes back empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from fleet_support import HEADERS, RedisServer, echo, open_on, two_replicas
from support import DEADLINE_S

import actors.fleet.states
from actors.frontends.http import fleet_sessions
from actors.gateway import Gateway


def sessions_of(gateway: Gateway) -> Any:
    assert gateway.http_listener is not None
    return gateway.http_listener._sessions


async def test_requests_arriving_together_at_a_replica_without_a_copy_wait_for_its_replayed_initialize(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request takes the session up on beta; the second comes while the initialize is replayed
    (held here until the second has either been answered or waits): it must wait, not get -32002."""
    replaying, release, second_in = trio.Event(), trio.Event(), trio.Event()
    replay = fleet_sessions._replay

    async def held(*args: Any) -> None:
        replaying.set()
        await release.wait()
        await replay(*args)

    monkeypatch.setattr(fleet_sessions, "_replay", held)

    class Watched(dict[str, trio.Event]):
        def get(self, key: str, default: Any = None) -> Any:
            found = super().get(key, default)
            if found is not None:
                second_in.set()  # a request waits on the take-up under way
            return found

    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url
        sessions_of(beta).taking_up = Watched()
        own = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
        answers: dict[int, Any] = {}

        async def post(number: int) -> None:
            response = await http.post(beta.http_url or "", json=echo(number, f"call {number}"), headers=own)
            answers[number] = response.json()
            second_in.set()  # answered: the replay may go on either way

        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(post, 2)
                await replaying.wait()
                nursery.start_soon(post, 3)
                await second_in.wait()
                release.set()
        for number in (2, 3):
            assert answers[number].get("result", {}).get("content") == [
                {"type": "text", "text": f"call {number}"}
            ], answers[number]


async def test_a_replica_registers_again_as_soon_as_redis_is_seen_empty(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its URL is how retries and answers are forwarded to it: after a Redis that restarted empty, found
    again at once, not at the next refresh (kept out of the way here)."""
    monkeypatch.setattr(actors.fleet.states, "REGISTER_EVERY_S", 3600.0)
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.fleet is not None and beta.fleet is not None
        assert await beta.fleet.states.owner_url("alpha") == alpha.http_url
        caught_up = trio.Event()

        async def after_catch_up() -> None:
            caught_up.set()

        alpha.fleet.store.on_back.append(after_catch_up)
        await alpha.fleet.store.command(lambda client: client.flushall())
        with trio.fail_after(DEADLINE_S):
            await caught_up.wait()
        assert await beta.fleet.states.owner_url("alpha") == alpha.http_url  # None for up to 5 s before
