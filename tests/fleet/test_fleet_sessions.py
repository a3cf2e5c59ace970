"""Legacy HTTP sessions across replicas: two gateways sharing a real redis-server, driven by the official SDK
client and by raw HTTP. A session opened on one replica is served by the other (its facts in Redis); its
id is sealed and names its owner; a tampered or foreign id is 404."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import httpx2
import jwt
import pytest
import trio
from fleet_support import (
    HEADERS,
    RedisServer,
    RoundRobin,
    delete_ends_it_on_both,
    echo,
    open_on,
    port_of,
    replica_config,
    two_replicas,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, running

SECRET: Final = "a-fleet-test-secret-of-at-least-32-bytes"


async def test_sdk_client_session_served_by_whichever_replica_a_request_lands_on(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        balancer = RoundRobin([port_of(alpha), port_of(beta)])
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=balancer, timeout=DEADLINE_S) as http,
                Client(streamable_http_client(alpha.http_url, http_client=http), mode="legacy") as client,
            ):
                for number in range(6):
                    result = await client.call_tool("echo", {"text": f"call {number}"})
                    assert result.content[0].text == f"call {number}"  # type: ignore[union-attr]
                assert balancer.turn >= 8  # initialize, initialized, six calls: both replicas served it
                held = [list(g.http_listener._sessions) for g in (alpha, beta)]  # type: ignore[union-attr]
                assert held[0] == held[1] and len(held[0]) == 1  # one session, under the id alpha minted


async def test_session_id_names_its_owner_and_a_tampered_or_foreign_id_is_404(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None and beta.http_url is not None and alpha.fleet is not None
        async with httpx2.AsyncClient(timeout=DEADLINE_S) as http:
            session_id = await open_on(http, alpha.http_url)
            assert alpha.fleet.sessions.owner(session_id) == "alpha"
            flipped = session_id[:10] + ("A" if session_id[10] != "A" else "B") + session_id[11:]
            foreign = "x" * len(session_id)
            for bad in (flipped, foreign):
                response = await http.post(
                    beta.http_url, json=echo(2, "no"), headers={**HEADERS, "mcp-session-id": bad}
                )
                assert response.status_code == 404
            good = await http.post(
                beta.http_url, json=echo(3, "yes"), headers={**HEADERS, "mcp-session-id": session_id}
            )
            assert good.status_code == 200 and good.json()["result"]["content"][0]["text"] == "yes"


async def test_another_principal_cannot_take_up_a_session(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts in Redis name the principal: bob, holding alice's session id, gets 404 on the other
    replica as on the owner."""
    monkeypatch.setenv("FLEET_TEST_SECRET", SECRET)
    auth = {"auth": {"jwt_secret_env": "FLEET_TEST_SECRET"}}
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha", **auth)) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta", **auth)) as beta,
    ):
        assert alpha.http_url is not None and beta.http_url is not None
        alice, bob = (
            {"authorization": f"Bearer {jwt.encode({'sub': who}, SECRET)}"} for who in ("alice", "bob")
        )
        async with httpx2.AsyncClient(timeout=DEADLINE_S) as http:
            session_id = await open_on(http, alpha.http_url, alice)
            for token, status in ((bob, 404), (alice, 200)):
                headers = {**HEADERS, **token, "mcp-session-id": session_id}
                response = await http.post(beta.http_url, json=echo(2, "hi"), headers=headers)
                assert response.status_code == status, response.text


async def test_a_session_deleted_on_one_replica_is_404_on_every_replica(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        own = await delete_ends_it_on_both(alpha, beta, http)
        for url in (alpha.http_url, beta.http_url):
            assert (await http.post(url, json=echo(3, "gone"), headers=own)).status_code == 404


async def test_a_replica_takes_a_session_up_on_the_route_it_was_opened_on(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The facts in Redis name the session's route: beta serves alice's /dev session at /dev with /dev's
    view (never the whole catalog), and its id at the listener's own path is 404 there as on alpha."""
    route = '\n[[routes]]\nname = "dev"\npaths = ["/dev"]\ninclude = ["echo"]\n'
    configs = [replica_config(tmp_path / name[0], redis_server, name) for name in ("alpha", "beta")]
    for config in configs:
        config.write_text(config.read_text() + route)
    async with (
        running(configs[0]) as alpha,
        running(configs[1]) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url is not None and beta.http_url is not None
        dev = {url: url.rsplit("/", 1)[0] + "/dev" for url in (alpha.http_url, beta.http_url)}
        session_id = await open_on(http, dev[alpha.http_url])
        own = {**HEADERS, "mcp-session-id": session_id}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        listed = await http.post(dev[beta.http_url], json=listing, headers=own)
        assert listed.status_code == 200, listed.text
        assert [tool["name"] for tool in listed.json()["result"]["tools"]] == ["echo"]
        add = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {}}}
        unknown = (await http.post(dev[beta.http_url], json=add, headers=own)).json()
        assert "Unknown tool: add" in unknown["error"]["message"]
        for url in (beta.http_url, alpha.http_url):  # the listener's own path: no such session there
            assert (await http.post(url, json=echo(4, "no"), headers=own)).status_code == 404
