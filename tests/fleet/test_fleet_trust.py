"""Pinned definitions across a fleet (#36): the baselines live in Redis, so a change one replica saw is held
on another that never saw the original, and an approval on one serves both (two replicas in this process,
one real redis-server, the rug-pull backend's processes sharing their state file, official SDK clients)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import coredis
import httpx2
import pytest
from fleet_support import RedisServer, with_fleet
from mcp import MCPError
from sdk_websocket import websocket_client
from support import DEADLINE_S, Notifications, running, tool_names, with_websocket
from trust_support import rugpull_config

CHANGED: Final = "notifications/tools/list_changed"
TOKEN_ENV: Final = "FLEET_TRUST_TOKEN"
TOKEN: Final = "fleet-trust-token-0123456789"


def replica(tmp_path: Path, redis: RedisServer, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    config = rugpull_config(folder, "--change-after", "1")
    shared = str(tmp_path / "rugpull.json")  # every replica's copy of the backend serves one state
    config.write_text(config.read_text().replace(str(folder / "rugpull.json"), shared))
    config.write_text(config.read_text() + f'\n[admin]\nport = 0\ntoken_env = "{TOKEN_ENV}"\n')
    return with_fleet(with_websocket(config), redis.url, name)


async def test_a_change_seen_by_one_replica_is_held_on_another_and_one_approval_serves_both(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    async with running(replica(tmp_path, redis_server, "alpha")) as alpha:
        assert alpha.websocket_url is not None
        heard = Notifications()
        async with websocket_client(alpha.websocket_url, message_handler=heard.handle) as on_alpha:
            await on_alpha.call_tool("fetch", {"url": "https://example.com"})  # alpha's backend changes
            await heard.wait_for(CHANGED, 1)
            assert "fetch" not in await tool_names(on_alpha)
            async with running(
                replica(tmp_path, redis_server, "beta")
            ) as beta:  # its first sight: the change
                assert beta.websocket_url is not None and beta.admin is not None
                async with websocket_client(beta.websocket_url) as on_beta:
                    assert "fetch" not in await tool_names(on_beta) and "add" in await tool_names(on_beta)
                    with pytest.raises(MCPError) as refused:
                        await on_beta.call_tool("fetch", {"url": "https://example.com"})
                    assert "held for review" in refused.value.error.message
                    bearer = {"authorization": f"Bearer {TOKEN}"}
                    async with httpx2.AsyncClient(headers=bearer, timeout=DEADLINE_S) as http:
                        listed = (await http.get(beta.admin.url + "/trust")).json()["held"]
                        held = next(entry for entry in listed if entry["id"] == "rugpull/fetch")
                        approve = {"name": "rugpull/fetch", "digest": held["digest"], "by": "ops"}
                        answer = await http.post(beta.admin.url + "/trust/approve", json=approve)
                        assert answer.status_code == 200, answer.text
                    assert "fetch" in await tool_names(on_beta)  # applied on beta before the answer
                    await heard.wait_for(CHANGED, 2)  # and alpha, told through Redis, shows it again
                    assert "fetch" in await tool_names(on_alpha)
                    result = await on_alpha.call_tool("fetch", {"url": "https://example.com/again"})
                    assert not result.is_error
    client = coredis.Redis.from_url(redis_server.url)
    async with client:
        assert await client.hlen("mcp-gateway:trust:held:rugpull") == 2  # its prompt and template, still held
        assert await client.llen("mcp-gateway:trust:events") <= 20


async def test_a_replica_started_while_redis_is_away_holds_its_definitions_until_it_answers(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: without the baselines nothing of a trusting backend is shown (nor trusted on first sight,
    which could be a change another replica holds); once Redis answers they are loaded and judged."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    redis_server.stop()
    async with running(replica(tmp_path, redis_server, "alpha")) as alpha:
        assert alpha.websocket_url is not None
        heard = Notifications()
        async with websocket_client(alpha.websocket_url, message_handler=heard.handle) as client:
            assert await tool_names(client) == []
            with pytest.raises(MCPError) as refused:
                await client.call_tool("add", {"a": 1, "b": 2})
            assert "not loaded yet" in refused.value.error.message
            redis_server.start()
            await heard.wait_for(CHANGED, 1)
            assert {"fetch", "add"} <= set(await tool_names(client))
