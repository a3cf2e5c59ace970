"""Messages across replicas through Redis pub/sub: a resource update seen by one replica's backend reaches a
subscribed client of another replica (official SDK clients), and what a session's copy on one replica has
for its client reaches the GET stream the client holds open on another (raw HTTP, where the stream is the
point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import orjson
import trio
from fleet_support import HEADERS, RedisServer, open_on, replica_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, Notifications, running

UPDATED = "notifications/resources/updated"
README = "test://t/readme"


def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def test_resource_update_seen_on_one_replica_reaches_a_subscriber_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
    ):
        assert alpha.http_url and beta.http_url
        on_beta = Notifications()
        with trio.fail_after(DEADLINE_S):
            async with (
                Client(streamable_http_client(alpha.http_url), mode="legacy") as toucher,
                Client(
                    streamable_http_client(beta.http_url), mode="legacy", message_handler=on_beta.handle
                ) as c,
            ):
                await c.subscribe_resource(README)
                await toucher.subscribe_resource(README)  # alpha's backend announces only what is subscribed
                result = await toucher.call_tool("touch", {"uri": README})
                assert result.structured_content == {"notified": True}
                await on_beta.wait_for(UPDATED, 1)  # beta's own backend was never touched


async def test_events_of_a_session_copy_reach_the_get_stream_open_on_another_replica(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url
        session_id = await open_on(http, alpha.http_url)
        headers = {**HEADERS, "mcp-session-id": session_id}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(alpha.http_url, json=initialized, headers=headers)).status_code == 202
        get_headers = {"accept": "text/event-stream", "mcp-session-id": session_id}
        with trio.fail_after(DEADLINE_S):
            async with http.stream("GET", alpha.http_url, headers=get_headers) as stream:
                assert stream.status_code == 200
                # beta takes the session up; its copy subscribes there and beta's backend announces an update
                subscribe = request(2, "resources/subscribe", {"uri": README})
                assert (await http.post(beta.http_url, json=subscribe, headers=headers)).status_code == 200
                touch = request(3, "tools/call", {"name": "touch", "arguments": {"uri": README}})
                touched = await http.post(beta.http_url, json=touch, headers=headers)
                assert touched.json()["result"]["structuredContent"] == {"notified": True}
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        event = orjson.loads(line[5:])
                        if event.get("method") == UPDATED:
                            assert event["params"]["uri"] == README
                            break
