"""A modern client's call parked on one replica (a legacy backend waiting for the client's elicitation) is
completed when the retry lands on another replica: forwarded to the owner over the internal hop. A state is
single use fleet-wide, and a retry whose owner is gone gets the spec's start-over error. The official SDK
client (2026-07-28) where the flow is the point, raw HTTP where a replay or a lost owner is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import trio
from fleet_support import HEADERS, RedisServer, port_of, replica_config
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, running

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


async def test_a_retry_landing_on_another_replica_completes_the_call_parked_on_the_first(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
    ):
        assert alpha.http_url and beta.http_url
        split = RetriesElsewhere(port_of(alpha), port_of(beta))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=split, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(alpha.http_url, http_client=http),
                    mode=MODERN,
                    elicitation_callback=ada,
                ) as client,
            ):
                result = await client.call_tool("ask_name", {})
                assert not result.is_error and result.content[0].text == "Hello, Ada"  # type: ignore[union-attr]
                assert split.retried is not None  # the retry went to beta, and beta forwarded it to alpha
                body, headers = split.retried
                again = await http.post(beta.http_url, content=body, headers=headers)
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
