"""A modern client's call parked on one replica (a legacy backend waiting for the client's elicitation) is
completed when the retry lands on another replica: forwarded to the owner over the internal hop. A state is
single use fleet-wide, and a retry whose owner is gone gets the spec's start-over error. The official SDK
client (2026-07-28) where the flow is the point, raw HTTP where a replay or a lost owner is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
import pytest
import trio
from fleet_support import HEADERS, RedisServer, port_of, replica_config
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, running

from actors.frontends.http import fleet_retries
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY

MODERN: Final = "2026-07-28"
MODERN_HEADERS: Final = {
    **HEADERS,
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "ask_name",
}


class RetriesElsewhere(httpx2.AsyncBaseTransport):
    """First requests to the first port, retries (a body with a requestState) to the second: the balancer's
    least-busy choice made to split a call from its retry. The last retry is kept, to be replayed."""

    def __init__(self, first: int, retries: int) -> None:
        self.first, self.retries = first, retries
        self.inner = httpx2.AsyncHTTPTransport()
        self.retried: tuple[bytes, dict[str, str]] | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        retry = b'"requestState"' in body
        if retry:
            self.retried = (body, dict(request.headers))
        request.url = request.url.copy_with(port=self.retries if retry else self.first)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def ada(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def modern_call(request_id: int, **params: Any) -> dict[str, Any]:
    meta = {
        PROTOCOL_VERSION_KEY: MODERN,
        CLIENT_CAPABILITIES_KEY: {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    arguments = {"name": "ask_name", "arguments": {}, **params, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": arguments}


ASK_ROUTE: Final = '\n[[routes]]\nname = "ask"\npaths = ["/ask"]\n[routes.tools.ask_name]\nname = "who"\n'


@pytest.mark.parametrize("routed", [False, True], ids=["listener", "route"])
async def test_a_retry_landing_on_another_replica_completes_the_call_parked_on_the_first(
    tmp_path: Path, redis_server: RedisServer, routed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a route, the retry is forwarded to the owner at the route's path (where the route's view and
    rules judge it, the tool named as the route names it), never at the listener's."""
    hops: list[str] = []
    relay = fleet_retries.relay_post

    async def recorded(url: str, *args: Any) -> int | None:
        hops.append(urlsplit(url).path)
        return await relay(url, *args)

    monkeypatch.setattr(fleet_retries, "relay_post", recorded)
    configs = [replica_config(tmp_path / name[0], redis_server, name) for name in ("alpha", "beta")]
    for config in configs if routed else ():
        config.write_text(config.read_text() + ASK_ROUTE)
    async with running(configs[0]) as alpha, running(configs[1]) as beta:
        assert alpha.http_url and beta.http_url
        url = alpha.http_url.rsplit("/", 1)[0] + "/ask" if routed else alpha.http_url
        split = RetriesElsewhere(port_of(alpha), port_of(beta))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=split, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(url, http_client=http),
                    mode=MODERN,
                    elicitation_callback=ada,
                ) as client,
            ):
                result = await client.call_tool("who" if routed else "ask_name", {})
                assert not result.is_error and result.content[0].text == "Hello, Ada"  # type: ignore[union-attr]
                assert split.retried is not None  # the retry went to beta, and beta forwarded it to alpha
                assert hops == ["/ask" if routed else "/mcp"]
                body, headers = split.retried
                again = await http.post(url, content=body, headers=headers)  # to beta, as split sends retries
                error = again.json()["error"]
                assert error["code"] == -32602 and "used already" in error["message"]


async def test_a_retry_whose_owner_is_gone_gets_the_start_over_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert beta.http_url
        async with running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha:
            assert alpha.http_url
            answer = (await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)).json()
            first = answer.get("result", answer)
            assert first.get("resultType") == "input_required", first
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        retry = modern_call(2, inputResponses=answers, requestState=first["requestState"])
        response = await http.post(beta.http_url, json=retry, headers=MODERN_HEADERS)
        error = response.json()["error"]
        assert error["code"] == -32602 and "start" in error["message"], error
