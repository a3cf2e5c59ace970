"""Redis down: each replica serves alone (its own sessions keep working, a new session opens) and says so on
/readyz and /status, another replica cannot take a session up (404: the client initializes again), and
once Redis is back the owner writes its sessions' facts again (Redis restarted empty here), so the other
replica takes them up."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
from fleet_support import HEADERS, RedisServer, echo, open_on, replica_config
from support import DEADLINE_S, running

from actors.fleet.store import MARKER_TTL_S


async def test_replicas_serve_alone_while_redis_is_down_and_catch_up_when_it_returns(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    alpha_config = replica_config(tmp_path / "a", redis_server, "alpha")
    alpha_config.write_text(alpha_config.read_text() + "\n[admin]\nport = 0\n")
    async with (
        running(alpha_config) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet and alpha.admin

        async def serving() -> tuple[str, str]:
            assert alpha.admin is not None
            ready = (await http.get(f"{alpha.admin.url}/readyz")).json()["fleet"]
            status = (await http.get(f"{alpha.admin.url}/status")).json()["fleet"]
            assert ready["replica"] == status["replica"] == "alpha"
            return ready["serving"], status["serving"]

        assert await serving() == ("fleet", "fleet")
        before = await open_on(http, alpha.http_url)
        redis_server.stop()  # and started again empty: nothing is saved
        during = await open_on(http, alpha.http_url)
        assert not alpha.fleet.store.available
        assert await serving() == ("alone", "alone")
        for session_id in (before, during):
            own = {**HEADERS, "mcp-session-id": session_id}
            assert (await http.post(alpha.http_url, json=echo(2, "alone"), headers=own)).status_code == 200
            assert (await http.post(beta.http_url, json=echo(3, "elsewhere"), headers=own)).status_code == 404
        redis_server.start()
        with trio.fail_after(DEADLINE_S):
            await alpha.fleet.store.wait_available()
            await beta.fleet.store.wait_available()
        assert await serving() == ("fleet", "fleet")
        for number, session_id in enumerate((before, during)):
            own = {**HEADERS, "mcp-session-id": session_id}
            response = await http.post(beta.http_url, json=echo(number, "taken up"), headers=own)
            assert response.status_code == 200, response.text
            assert response.json()["result"]["content"][0]["text"] == "taken up"


async def test_a_replicas_marker_expires_so_a_name_that_never_returns_leaves_no_key(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha:
        assert alpha.fleet is not None and alpha.fleet.store.available
        marker = f"{alpha.fleet.store.settings.key_prefix}:marker:alpha"
        ttl = await alpha.fleet.store.command(lambda client: client.ttl(marker))
        assert 0 < ttl <= MARKER_TTL_S  # -1 (no expiry) before: one key per process start, for good
