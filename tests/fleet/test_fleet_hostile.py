"""Clients that send the fleet what it did not hand them: a made-up forwarding signature, initializes that
fail, session ids it cannot take up here. Each gets a clear answer, and leaves nothing behind in Redis or in
a replica's tables."""

from __future__ import annotations

from pathlib import Path

import httpx2
from fleet_support import RedisServer, replica_config
from support import DEADLINE_S, running
from test_fleet_parked_calls import MODERN_HEADERS, modern_call


async def test_a_client_sending_a_forwarding_signature_of_its_own_gets_its_retry_served(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The header replicas sign a forwarded retry with, sent by a client with "²" as its time (a digit to
    `str.isdigit`, not to `int`): no signature, the retry served as any other (it was a 500, a traceback)."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url
        asked = await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)
        first = asked.json()["result"]
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        retry = modern_call(2, inputResponses=answers, requestState=first["requestState"])
        forged = {**MODERN_HEADERS, "mcp-gateway-forwarded": b"\xb2.0"}
        response = await http.post(alpha.http_url, json=retry, headers=forged)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["content"][0]["text"] == "Hello, Ada"
        replay = (await http.post(alpha.http_url, json=retry, headers=MODERN_HEADERS)).json()
        assert replay["error"]["code"] == -32602 and "used already" in replay["error"]["message"]
