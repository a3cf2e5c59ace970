"""A fleet behind a balancer with no stickiness: whatever a client sends may land on any replica. Two
gateways share a real redis-server: a Redis that comes back empty."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from fleet_support import (
    RedisServer,
    two_replicas,
)
from support import DEADLINE_S

import actors.fleet.states


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
