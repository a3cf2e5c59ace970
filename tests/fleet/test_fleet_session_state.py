"""What a legacy session's client set after initialize survives its take-up by another replica: the log level
(logging/setLevel) and the resource subscriptions, kept in Redis beside the session's facts and asked again
by the replica that takes the session up (official SDK client over real HTTP, two replicas, one real
redis-server; a client-side balancer moves the session's requests from one replica to the other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import coredis
import httpx2
import trio
from fleet_support import RedisServer, Switch, port_of, two_replicas
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, Notifications

from actors.fleet.sessions import digest_of

UPDATED = "notifications/resources/updated"
README = "test://t/readme"


async def test_a_session_taken_up_by_another_replica_keeps_its_log_level_and_subscriptions(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        logged: list[Any] = []
        notifications = Notifications()

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logged.append(params.data)

        switch = Switch(port_of(alpha))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=switch, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(alpha.http_url, http_client=http),
                    mode="legacy",
                    logging_callback=on_log,
                    message_handler=notifications.handle,
                ) as client,
            ):
                await client.set_logging_level("error")
                await client.subscribe_resource(README)
                switch.port = port_of(beta)  # from here on beta serves the session: it takes it up
                await client.call_tool("log", {"level": "info", "data": "below the level set"})
                await client.call_tool("log", {"level": "error", "data": "at the level set"})
                await client.call_tool("log", {"level": "critical", "data": "above it"})
                await notifications.wait_for("notifications/message", 2)  # on the GET stream, maybe
                assert logged == ["at the level set", "above it"]
                touched = await client.call_tool("touch", {"uri": README})
                assert touched.structured_content == {"notified": True}  # beta's backend was subscribed
                await notifications.wait_for(UPDATED, 1)
                held = [list(g.http_listener._sessions) for g in (alpha, beta)]  # type: ignore[union-attr]
                assert held[0] == held[1] and len(held[0]) == 1  # one session, taken up by beta


async def test_an_unsubscribe_on_one_replica_is_not_subscribed_again_at_a_take_up(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        switch = Switch(port_of(alpha))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=switch, timeout=DEADLINE_S) as http,
                Client(streamable_http_client(alpha.http_url, http_client=http), mode="legacy") as client,
            ):
                await client.subscribe_resource(README)
                await client.unsubscribe_resource(README)
                switch.port = port_of(beta)
                touched = await client.call_tool("touch", {"uri": README})
                assert touched.structured_content == {"notified": False}  # beta's backend: nobody subscribed


async def test_a_replica_using_a_session_keeps_alive_the_level_another_replica_noted(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None and alpha.fleet is not None
        switch = Switch(port_of(alpha))
        redis = coredis.Redis.from_url(
            redis_server.url, connect_timeout=DEADLINE_S, stream_timeout=DEADLINE_S
        )
        with trio.fail_after(DEADLINE_S):
            async with (
                redis,
                httpx2.AsyncClient(transport=switch, timeout=DEADLINE_S) as http,
                Client(streamable_http_client(alpha.http_url, http_client=http), mode="legacy") as client,
            ):
                switch.port = port_of(beta)
                await client.set_logging_level("error")  # noted by beta, which took the session up
                (session_id,) = alpha.http_listener._sessions  # type: ignore[union-attr]
                state_key = f"mcp-gateway:session-state:{digest_of(session_id)}"
                assert await redis.hgetall(state_key) == {b"level": b"error"}
                await redis.expire(state_key, 20)
                switch.port = port_of(alpha)
                alpha.fleet.sessions._refreshed[session_id] = trio.current_time() - 3600  # due a refresh
                await client.list_tools()
                assert await redis.ttl(state_key) > 20  # refreshed by alpha, which never noted it
