"""Streamable HTTP backends (`url = "http://..."`): the gateway as an HTTP client of real servers, the
reference server-everything (npm) and another gateway, with its session kept, resumed after a 404 by a
new initialize under the supervisor, and progress and backends' requests crossing the HTTP hop."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import jwt
import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import (
    DEADLINE_S,
    SERVER_EVERYTHING,
    Notifications,
    backend_entry,
    progress_and_sampling,
    running,
    sampler,
    with_http,
    write_config,
)

SECRET = "a-secret-for-the-inner-gateway-32-bytes"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    reply = types.TextContent(type="text", text="sampled at the far end")
    return types.CreateMessageResult(role="assistant", content=reply, model="m")


async def test_a_gateway_behind_a_gateway_over_http_and_a_new_session_after_404(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = jwt.encode({"sub": "outer"}, SECRET, algorithm="HS256")
    monkeypatch.setenv("INNER_SECRET", SECRET)
    monkeypatch.setenv("INNER_AUTHORIZATION", f"Bearer {token}")  # the outer gateway's header, from env
    inner_auth = {"jwt_secret_env": "INNER_SECRET"}
    inner_config = with_http(write_config(tmp_path / "inner.toml", [backend_entry("t")]), auth=inner_auth)
    async with running(inner_config) as inner:
        assert inner.http_url is not None and inner.http_listener is not None
        remote = {
            "name": "remote",
            "url": inner.http_url,
            "headers_env": {"Authorization": "INNER_AUTHORIZATION"},
            "era": "legacy",  # a session to lose and find again (under auto the inner gateway is modern)
        }
        outer_config = with_http(write_config(tmp_path / "outer.toml", [remote]))
        async with running(outer_config) as outer:
            assert outer.http_url is not None
            notifications = Notifications()
            client_cm = Client(
                streamable_http_client(outer.http_url),
                mode="legacy",
                sampling_callback=sample,
                message_handler=notifications.handle,
            )
            with trio.fail_after(DEADLINE_S):
                async with client_cm as client:
                    await progress_and_sampling(client, "sampled at the far end")

                    (session_id,) = inner.http_listener._sessions  # the outer gateway's session
                    authorization = {"authorization": os.environ["INNER_AUTHORIZATION"]}
                    async with httpx2.AsyncClient(headers=authorization) as http:
                        ended = await http.delete(inner.http_url, headers={"mcp-session-id": session_id})
                    assert ended.status_code == 204
                    # the backend leaves the catalog on the 404 and comes back with a new session
                    await notifications.wait_for("notifications/tools/list_changed", 2)
                    again = await client.call_tool("echo", {"text": "new session"})
                    assert again.content[0].text == "new session"  # type: ignore[union-attr]
                    assert list(inner.http_listener._sessions) != [session_id]


@asynccontextmanager
async def server_everything(node: Path) -> AsyncIterator[str]:
    """The reference server-everything over Streamable HTTP on a free port: its URL."""
    port = free_port()
    environment = {**os.environ, "PORT": str(port)}
    server = await trio.lowlevel.open_process(
        [str(node), str(SERVER_EVERYTHING), "streamableHttp"], env=environment, stdout=-1, stderr=-1
    )
    try:
        assert server.stderr is not None
        with trio.fail_after(DEADLINE_S):
            seen = b""
            while b"listening on port" not in seen:
                chunk = await server.stderr.receive_some()
                assert chunk, seen.decode()
                seen += chunk
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        await server.wait()


async def test_server_everything_over_streamable_http(tmp_path: Path, node: Path) -> None:
    async with server_everything(node) as url:
        config = with_http(write_config(tmp_path / "g.toml", [{"name": "everything", "url": url}]))
        async with running(config) as gateway:
            assert gateway.http_url is not None
            with trio.fail_after(DEADLINE_S):
                async with Client(
                    streamable_http_client(gateway.http_url), mode="legacy", sampling_callback=sample
                ) as client:
                    names = [tool.name for tool in (await client.list_tools()).tools]
                    assert "get-sum" in names and "echo" in names
                    summed = await client.call_tool("get-sum", {"a": 2, "b": 3})
                    assert "The sum of 2 and 3 is 5" in summed.content[0].text  # type: ignore[union-attr]
                    sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hi"})
                    assert "sampled at the far end" in sampled.content[0].text  # type: ignore[union-attr]
                    prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
                    assert prompts


async def test_each_sampling_request_of_an_http_backend_goes_to_the_client_whose_call_streamed_it(
    tmp_path: Path, node: Path
) -> None:
    """Two clients' calls at once on one HTTP backend: the TypeScript SDK sends a tool's sampling request on
    the response stream of the POST of that call, and that stream alone says whose it is (the server sends
    no trace context)."""
    a_asked, b_answered = trio.Event(), trio.Event()
    async with server_everything(node) as url:
        config = with_http(write_config(tmp_path / "g.toml", [{"name": "everything", "url": url}]))
        async with running(config) as gateway:
            assert gateway.http_url is not None
            answers: dict[str, str] = {}
            with trio.fail_after(DEADLINE_S):
                async with (
                    Client(
                        streamable_http_client(gateway.http_url),
                        mode="legacy",
                        sampling_callback=sampler("A", a_asked, b_answered),
                    ) as a,
                    Client(
                        streamable_http_client(gateway.http_url),
                        mode="legacy",
                        sampling_callback=sampler("B", b_answered),
                    ) as b,
                ):

                    async def call(name: str, client: Client) -> None:
                        result = await client.call_tool("trigger-sampling-request", {"prompt": name})
                        answers[name] = result.content[0].text  # type: ignore[union-attr]

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(call, "A", a)
                        await a_asked.wait()  # A's question is open while B calls and is asked
                        await call("B", b)
    assert "A answers" in answers["A"] and "B answers" not in answers["A"]
    assert "B answers" in answers["B"] and "A answers" not in answers["B"]
