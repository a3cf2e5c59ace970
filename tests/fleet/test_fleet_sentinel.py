"""[fleet] through Redis Sentinel: `redis+sentinel://host:port/service` opens the primary the sentinel names.
Real processes: a primary, its replica, one sentinel; two gateways share a session through it, and follow a
failover (the primary killed, the sentinel promotes the replica, the fleet writes there)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
from fleet_support import HEADERS, echo, open_on, two_replicas
from redis_topologies import DEMOTED_S, SentinelSetup, redis_cli
from support import DEADLINE_S

from actors.fleet.store import FleetStore, StoreUnavailableError


async def _written_through(store: FleetStore) -> None:
    """Until a write through `store` succeeds: each failure marks the link down, and the wait is for the
    store's watcher to find Redis answering again."""
    while True:
        await store.wait_available()
        try:
            await store.command(lambda client: client.set(b"{probe}", b"1"))
            return
        except StoreUnavailableError:
            continue


async def test_two_replicas_share_a_session_through_the_primary_a_sentinel_names(
    tmp_path: Path, redis_sentinel: SentinelSetup
) -> None:
    async with (
        two_replicas(tmp_path, redis_sentinel) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        assert alpha.fleet.store.available and beta.fleet.store.available
        session_id = await open_on(http, alpha.http_url)
        own = {**HEADERS, "mcp-session-id": session_id}
        answer = await http.post(beta.http_url, json=echo(2, "through sentinel"), headers=own)
        assert (
            answer.status_code == 200 and answer.json()["result"]["content"][0]["text"] == "through sentinel"
        )
        held = redis_cli(redis_sentinel.primary.port, "--scan", "--pattern", "mcp-gateway:session:*")
        assert held.strip(), "the session's facts are on the primary the sentinel names"


async def test_after_a_failover_the_fleet_writes_to_the_promoted_primary(
    tmp_path: Path, redis_sentinel: SentinelSetup
) -> None:
    async with (
        two_replicas(tmp_path, redis_sentinel) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        before = await open_on(http, alpha.http_url)
        await trio.to_thread.run_sync(redis_sentinel.wait_replica_known)  # or no failover can happen
        old_port = redis_sentinel.primary.port
        redis_sentinel.primary.stop()  # killed: the sentinel sees it down after 500 ms and promotes
        with trio.fail_after(DEADLINE_S):
            for store in (alpha.fleet.store, beta.fleet.store):
                await _written_through(store)  # only the promoted replica can take a write now
        assert redis_sentinel.primary_port() == redis_sentinel.replica.port != old_port
        after = await open_on(http, alpha.http_url)  # its facts written to the new primary
        for session_id in (before, after):
            own = {**HEADERS, "mcp-session-id": session_id}
            answer = await http.post(beta.http_url, json=echo(3, "resumed"), headers=own)
            assert answer.status_code == 200, answer.text
        held = redis_cli(redis_sentinel.replica.port, "--scan", "--pattern", "mcp-gateway:session:*")
        assert len(held.split()) == 2


async def test_a_failover_that_keeps_the_old_primary_alive_is_followed_to_the_new_one(
    tmp_path: Path, redis_sentinel: SentinelSetup
) -> None:
    """SENTINEL FAILOVER: the old primary lives on as a replica and still answers pings; the link notices
    its role, drops its connections and writes to the promoted one."""
    async with (
        two_replicas(tmp_path, redis_sentinel) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        await trio.to_thread.run_sync(redis_sentinel.wait_replica_known)
        old_port = redis_sentinel.primary.port
        await trio.to_thread.run_sync(redis_sentinel.failover)
        with trio.fail_after(DEMOTED_S + DEADLINE_S):
            await trio.to_thread.run_sync(redis_sentinel.wait_demoted, old_port)  # alive, now a replica
            for store in (alpha.fleet.store, beta.fleet.store):
                await _written_through(store)
        session_id = await open_on(http, alpha.http_url)  # its facts on the new primary
        own = {**HEADERS, "mcp-session-id": session_id}
        answer = await http.post(beta.http_url, json=echo(4, "after failover"), headers=own)
        assert answer.status_code == 200, answer.text
        new_port = redis_sentinel.primary_port()
        assert new_port != old_port
        held = redis_cli(new_port, "--scan", "--pattern", "mcp-gateway:session:*")
        assert held.strip(), "the session was written to the promoted primary"
