"""A backend's list change across replicas: when one replica's backend announces that its tools changed, every
other replica lists its own copy of that backend again and tells its clients (official SDK clients over real
HTTP, two replicas, one real redis-server; the backend's processes share their tool list through a file, as
copies of one service share its state). The re-listing a notice causes is never announced again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import coredis
import orjson
import trio
from fleet_support import RedisServer, with_fleet
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, Notifications, backend_entry, running, tool_names, with_http, write_config

from actors.gateway import Gateway

TOOLS_CHANGED: Final = "notifications/tools/list_changed"
NOTICES: Final = "mcp-gateway:notices"


def shared_tools_replica(folder: Path, redis: RedisServer, replica: str, tools_file: Path) -> Path:
    folder.mkdir(exist_ok=True)
    backend = backend_entry("t", f"--tools-file={tools_file}")
    return with_fleet(with_http(write_config(folder / "g.toml", [backend])), redis.url, replica)


@attrs.define
class Heard:
    """The list-change notices published on the fleet's notices channel, as they arrive."""

    notices: list[dict[str, Any]] = attrs.field(factory=list)
    _more: trio.Event = attrs.field(factory=trio.Event)

    def add(self, notice: dict[str, Any]) -> None:
        self.notices.append(notice)
        self._more.set()
        self._more = trio.Event()

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(DEADLINE_S):
            while len(self.notices) < count:
                await self._more.wait()


@asynccontextmanager
async def notices_heard(redis: RedisServer) -> AsyncIterator[Heard]:
    """Every list-change notice published on the fleet's notices channel while inside."""
    heard = Heard()
    client = coredis.Redis.from_url(redis.url, connect_timeout=DEADLINE_S, stream_timeout=DEADLINE_S)
    async with client, client.pubsub() as pubsub:
        await pubsub.subscribe(NOTICES)

        async def read() -> None:
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True)
                if message is not None and message.get("type") == "message":
                    notice = orjson.loads(message["data"])
                    if "changed" in notice:
                        heard.add(notice)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            yield heard
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def two_replicas(tmp_path: Path, redis: RedisServer) -> AsyncIterator[tuple[Gateway, Gateway]]:
    tools_file = tmp_path / "tools.json"
    async with (
        running(shared_tools_replica(tmp_path / "a", redis, "alpha", tools_file)) as alpha,
        running(shared_tools_replica(tmp_path / "b", redis, "beta", tools_file)) as beta,
    ):
        yield alpha, beta


async def test_tools_list_change_on_one_replica_is_listed_again_and_told_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta), notices_heard(redis_server) as heard:
        assert alpha.http_url and beta.http_url
        on_beta = Notifications()
        with trio.fail_after(DEADLINE_S):
            async with (
                Client(streamable_http_client(alpha.http_url), mode="legacy") as changer,
                Client(
                    streamable_http_client(beta.http_url), mode="legacy", message_handler=on_beta.handle
                ) as watcher,
            ):
                assert "fresh" not in await tool_names(watcher)
                await changer.call_tool("set_tools", {"extra": ["fresh"]})
                await on_beta.wait_for(TOOLS_CHANGED, 1)  # beta's own backend process announced nothing
                assert "fresh" in await tool_names(watcher)
                # Beta's re-listing is not announced again: only alpha's notices cross Redis.
                await changer.call_tool("set_tools", {"extra": ["fresh", "second"]})
                await on_beta.wait_for(TOOLS_CHANGED, 2)
                await heard.wait_for(2)
                assert [notice["from"] for notice in heard.notices] == ["alpha", "alpha"]
                assert {notice["backend"] for notice in heard.notices} == {"t"}
                assert "second" in await tool_names(watcher)


async def test_a_list_change_made_while_redis_is_down_reaches_the_other_replica_when_it_returns(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Alpha's backend changes its tools while Redis is down: the notice cannot cross then. Once Redis is
    back (restarted empty), beta's clients are told and beta lists the new tools: alpha publishes what it
    missed, and beta checks its own copies' lists (news to its clients because the list differs)."""
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        on_alpha, on_beta = Notifications(), Notifications()
        with trio.fail_after(DEADLINE_S):
            async with (
                Client(
                    streamable_http_client(alpha.http_url), mode="legacy", message_handler=on_alpha.handle
                ) as changer,
                Client(
                    streamable_http_client(beta.http_url), mode="legacy", message_handler=on_beta.handle
                ) as watcher,
            ):
                assert "fresh" not in await tool_names(watcher)
                redis_server.stop()
                await changer.call_tool("set_tools", {"extra": ["fresh"]})
                await on_alpha.wait_for(TOOLS_CHANGED, 1)  # alpha listed its own backend again, Redis away
                redis_server.start()
                await alpha.fleet.store.wait_available()
                await beta.fleet.store.wait_available()
                await on_beta.wait_for(TOOLS_CHANGED, 1)
                assert "fresh" in await tool_names(watcher)
