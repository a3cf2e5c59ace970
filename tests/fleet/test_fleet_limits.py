"""[limits] across replicas: one caller (here: its address, no tokens) calling through two replicas meets
one rate limit and one cap on calls in flight, added up in Redis by the fleet's Lua scripts. Official SDK
clients, one per replica; the syncs are run by the test so nothing waits on a timer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio
from fleet_support import RedisServer, replica_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, running

from actors.gateway import Gateway


def limited(folder: Path, redis: RedisServer, replica: str, limits: str) -> Path:
    config = replica_config(folder, redis, replica)
    config.write_text(config.read_text() + f"\n[limits]\n{limits}\n")
    return config


@asynccontextmanager
async def pair(tmp_path: Path, redis: RedisServer, limits: str) -> AsyncIterator[tuple[Gateway, Gateway]]:
    async with (
        running(limited(tmp_path / "a", redis, "alpha", limits)) as alpha,
        running(limited(tmp_path / "b", redis, "beta", limits)) as beta,
    ):
        await reaching_redis(alpha, beta)
        yield alpha, beta


async def reaching_redis(*gateways: Gateway) -> None:
    """Until each replica has Redis (on a loaded machine its first connection may time out: it then serves
    alone, as it should, until Redis answers: the shared limits are what these tests are about)."""
    with trio.fail_after(DEADLINE_S):
        for gateway in gateways:
            assert gateway.fleet is not None
            await gateway.fleet.store.wait_available()


async def sync(*gateways: Gateway) -> None:
    for gateway in gateways:
        assert gateway.fleet is not None
        await gateway.fleet.limits.sync()


def text_of(result: object) -> str:
    return getattr(result.content[0], "text", "")  # type: ignore[attr-defined]


async def test_a_caller_over_its_burst_across_replicas_is_rate_limited(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with pair(tmp_path, redis_server, "calls_per_s = 0.01\nburst = 2") as (alpha, beta):
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
                await sync(alpha, beta)
                refused = await on_beta.call_tool("echo", {"text": "4"})  # beta alone: within its burst
                assert refused.is_error and "rate limited" in text_of(refused)


async def test_calls_in_flight_on_one_replica_count_against_the_cap_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with pair(tmp_path, redis_server, "max_inflight = 1") as (alpha, beta):
        assert alpha.http_url and beta.http_url and alpha.limiter.caps is not None
        with trio.fail_after(DEADLINE_S):
            async with (
                Client(streamable_http_client(alpha.http_url), mode="legacy") as on_alpha,
                Client(streamable_http_client(beta.http_url), mode="legacy") as on_beta,
                trio.open_nursery() as nursery,
            ):
                running_on_alpha = trio.Event()

                async def first_step(progress: float, total: float | None, message: str | None) -> None:
                    running_on_alpha.set()

                arguments = {"steps": 2, "delay": 60}
                nursery.start_soon(
                    partial(on_alpha.call_tool, "progress", arguments, progress_callback=first_step)
                )
                await running_on_alpha.wait()  # admitted on alpha, and in flight there
                await sync(alpha, beta)
                refused = await on_beta.call_tool("echo", {"text": "second"})
                assert refused.is_error and "already in flight" in text_of(refused)
                nursery.cancel_scope.cancel()
