"""Each cross-era pair through the gateway, with real peers on both sides (issue #16's proof).

- A modern client (the TypeScript SDK v2 pinned to 2026-07-28, and the Python SDK's `Client(mode=
  "2026-07-28")`) in front of a legacy backend (the project's test backend): the backend's real elicitation
  and sampling requests reach the client as input_required rounds.
- A legacy client (the Python SDK pinned to the handshake era) in front of a modern-only backend (the
  TypeScript SDK v2 server, `legacy: 'reject'`): the backend's input_required rounds reach the client as real
  elicitation and sampling requests.
- A modern client in front of a modern backend: the rounds pass through, the backend's state sealed in the
  gateway's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import orjson
import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError
from support import ROOT, TEST_BACKEND, gateway_argv, running, sdk_client, with_http, write_config
from ts_modern import modern_server_argv

MODERN: Final = "2026-07-28"
CLIENT: Final = ROOT / "tests" / "interop" / "ts_modern_client.mjs"
RUN_DEADLINE_S: Final = 60.0


def legacy_backend() -> dict[str, Any]:
    """The test backend with the two tools ts_modern_client.mjs calls, answering as a 2025-11-25 server."""
    args = [str(TEST_BACKEND), "--name", "legacy", "--only=echo,ask_name,ask_client"]
    return {"name": "legacy", "command": sys.executable, "args": args, "era": "legacy"}


def modern_backend(node: Path) -> dict[str, Any]:
    argv = modern_server_argv(node)
    return {"name": "ts", "command": argv[0], "args": argv[1:], "era": "auto"}


async def run_ts_client(node: Path, *target: str) -> dict[str, Any]:
    done = await trio.run_process(
        [str(node), str(CLIENT), *target], capture_stdout=True, capture_stderr=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return orjson.loads(done.stdout.decode().splitlines()[-1])  # type: ignore[no-any-return]


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    reply = types.TextContent(type="text", text="Paris")
    return types.CreateMessageResult(role="assistant", content=reply, model="test-model")


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content)


async def test_the_typescript_client_pinned_to_2026_through_the_gateway_to_a_legacy_backend(
    tmp_path: Path, node: Path
) -> None:
    """Over stdio and over HTTP: discover, lists, a call, and an elicitation the legacy backend asks for
    with a real request, which the TypeScript client answers as an input_required round."""
    config = with_http(write_config(tmp_path / "g.toml", [legacy_backend()], name="ts-modern"))
    stdio = gateway_argv(config, tmp_path / "stdio.log")
    with trio.fail_after(RUN_DEADLINE_S):
        over_stdio = await run_ts_client(node, *stdio)
        async with running(config) as gateway:
            assert gateway.http_url is not None
            over_http = await run_ts_client(node, gateway.http_url)
    for report in (over_stdio, over_http):
        assert (report["protocolVersion"], report["era"], report["serverName"]) == (
            MODERN,
            "modern",
            "ts-modern",
        )
        assert {"echo", "ask_name"} <= set(report["tools"])
        assert report["echo"] == "from typescript"
        assert (report["askName"], report["elicited"]) == ("Hello, Ada", 1)


async def test_the_python_client_pinned_to_2026_over_http_to_a_legacy_backend(tmp_path: Path) -> None:
    config = with_http(write_config(tmp_path / "g.toml", [legacy_backend()]))
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    async with running(config) as gateway:
        assert gateway.http_url is not None
        client = Client(gateway.http_url, mode=MODERN, elicitation_callback=elicit, sampling_callback=sample)
        with trio.fail_after(RUN_DEADLINE_S):
            async with client:
                assert text_of(await client.call_tool("ask_name", {})) == "Hello, Ada"
                sampled = await client.call_tool("ask_client", sampling)
    assert sampled.structured_content["result"]["content"]["text"] == "Paris"  # type: ignore[index]


async def test_a_legacy_client_answers_a_modern_backends_rounds_with_real_requests(
    tmp_path: Path, node: Path
) -> None:
    config = write_config(tmp_path / "g.toml", [modern_backend(node)])
    asked: list[str] = []

    async def elicit_once(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append("elicitation/create")
        return await elicit(context, params)

    async def sample_once(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append("sampling/createMessage")
        return await sample(context, params)

    callbacks = {"elicitation_callback": elicit_once, "sampling_callback": sample_once}
    async with sdk_client(config, tmp_path / "gateway.log", **callbacks) as client:
        assert text_of(await client.call_tool("ask_name", {})) == "Hello, Ada"
        assert text_of(await client.call_tool("ask_model", {})) == "The model said: Paris"
    assert asked == ["elicitation/create", "sampling/createMessage"]


async def test_a_legacy_client_without_the_capability_is_refused_by_name(tmp_path: Path, node: Path) -> None:
    """The backend is told the legacy client's real capabilities (none), so it refuses to ask for input
    the client cannot give, with -32021 naming what is missing."""
    config = write_config(tmp_path / "g.toml", [modern_backend(node)])
    async with sdk_client(config, tmp_path / "gateway.log") as client:  # declares no elicitation
        with pytest.raises(MCPError) as refused:
            await client.call_tool("ask_name", {})
    assert refused.value.code == -32021 and "elicitation" in refused.value.message


async def test_a_modern_client_and_a_modern_backend_pass_the_rounds_through(
    tmp_path: Path, node: Path
) -> None:
    config = write_config(tmp_path / "g.toml", [modern_backend(node)])
    argv = gateway_argv(config, tmp_path / "gateway.log")
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    client = Client(params, mode=MODERN, elicitation_callback=elicit, sampling_callback=sample)
    with trio.fail_after(RUN_DEADLINE_S):
        async with client:
            assert text_of(await client.call_tool("ask_name", {})) == "Hello, Ada"
            assert text_of(await client.call_tool("ask_model", {})) == "The model said: Paris"
