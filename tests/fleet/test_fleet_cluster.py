"""[fleet] through a Redis Cluster: `redis+cluster://host:port,...` opens coredis' cluster client, and every
key and Lua script of the fleet carries the `{key_prefix}` hash tag (one slot: multi-key scripts work).
Real processes: a 3-node cluster made by redis-cli; two gateways share a session and a rate-limit bucket."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
from fleet_support import HEADERS, delete_ends_it_on_both, echo, open_on, two_replicas
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from redis_topologies import ClusterSetup, redis_cli
from support import DEADLINE_S, running
from test_fleet_limits import limited, sync, text_of


async def test_two_replicas_share_a_session_through_a_redis_cluster(
    tmp_path: Path, redis_cluster: ClusterSetup
) -> None:
    async with (
        two_replicas(tmp_path, redis_cluster) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        assert alpha.fleet.store.available and beta.fleet.store.available
        session_id = await open_on(http, alpha.http_url)
        own = {**HEADERS, "mcp-session-id": session_id}
        answer = await http.post(beta.http_url, json=echo(2, "through a cluster"), headers=own)
        assert (
            answer.status_code == 200 and answer.json()["result"]["content"][0]["text"] == "through a cluster"
        )
        slot = redis_cli(redis_cluster.nodes[0].port, "cluster", "keyslot", "{mcp-gateway}").strip()
        held = [int(redis_cli(n.port, "cluster", "countkeysinslot", slot)) for n in redis_cluster.nodes]
        assert sum(held) >= 3  # the session's facts and each replica's marker: in one slot, on one node


async def test_two_replicas_share_a_rate_limit_bucket_through_a_redis_cluster(
    tmp_path: Path, redis_cluster: ClusterSetup
) -> None:
    limits = "calls_per_s = 0.01\nburst = 2"
    async with (
        running(limited(tmp_path / "a", redis_cluster, "alpha", limits)) as alpha,  # type: ignore[arg-type]
        running(limited(tmp_path / "b", redis_cluster, "beta", limits)) as beta,  # type: ignore[arg-type]
    ):
        assert alpha.http_url and beta.http_url
        with trio.fail_after(DEADLINE_S):
            async with (
                Client(streamable_http_client(alpha.http_url), mode="legacy") as on_alpha,
                Client(streamable_http_client(beta.http_url), mode="legacy") as on_beta,
            ):
                assert not (await on_beta.call_tool("echo", {"text": "1"})).is_error
                assert not (await on_alpha.call_tool("echo", {"text": "2"})).is_error  # 2 of the burst of 2
                third = await on_alpha.call_tool("echo", {"text": "3"})  # alpha alone would allow it, and
                assert not third.is_error or "rate limited" in text_of(third)  # does until it has synced
                await sync(alpha, beta)  # the multi-key Lua script, on the cluster
                refused = await on_beta.call_tool("echo", {"text": "4"})
                assert refused.is_error and "rate limited" in text_of(refused)


async def test_a_session_deleted_on_one_replica_ends_on_the_other_through_cluster_pub_sub(
    tmp_path: Path, redis_cluster: ClusterSetup
) -> None:
    async with (
        two_replicas(tmp_path, redis_cluster) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        await delete_ends_it_on_both(alpha, beta, http)  # beta's notice, published on the cluster
