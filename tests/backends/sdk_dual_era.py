"""A backend built on the official Python SDK 2.3 (MCPServer over stdio), which accepts both eras the way
that SDK does: a connection is pinned to the era of its first request. One tool asks the client the old
way (a real sampling/createMessage and elicitation/create during the call: only a legacy connection has
that back-channel), one the new way (an `input_required` result: only a 2026-07-28 connection returns it).

`whoami` says which era this process serves and its pid, so a test can tell the connections apart;
`exit_now` ends the process that serves it. With `--http` it serves Streamable HTTP instead of stdio.
"""

from __future__ import annotations

import os
import socket
import sys
from functools import partial

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

server = MCPServer("sdk-dual-era")


class Answer(BaseModel):
    answer: str


@server.tool()
async def ask_old_way(ctx: Context, question: str) -> str:
    """Samples the client's model, then elicits a confirmation: real requests during the call."""
    sampled = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50,
    )
    said = sampled.content.text if isinstance(sampled.content, TextContent) else str(sampled.content)
    elicited = await ctx.elicit(message=f"confirm {said}?", schema=Answer)
    answer = elicited.data.answer if elicited.action == "accept" and elicited.data else elicited.action
    return f"sampled {said}; elicited {answer}"


@server.tool()
async def ask_new_way(ctx: Context, question: str) -> str | InputRequiredResult:
    """Asks by returning input_required; answers once the retry carries the sampled text."""
    responses = ctx.input_responses
    if not responses:
        params = CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=question))],
            max_tokens=50,
        )
        return InputRequiredResult(
            input_requests={"llm": CreateMessageRequest(params=params)}, request_state="round-1"
        )
    sampled = responses["llm"]
    content = sampled.get("content", {}) if isinstance(sampled, dict) else getattr(sampled, "content", None)
    text = content.get("text") if isinstance(content, dict) else getattr(content, "text", str(content))
    return f"new way: {text} (state {ctx.request_state})"


@server.tool()
async def whoami(ctx: Context) -> str:
    """This process's pid and the protocol version of the request."""
    return f"pid {os.getpid()} protocol {ctx.protocol_version}"


@server.tool()
async def hold(ctx: Context) -> str:
    """Reports progress once (the call is under way), then holds the call for a minute."""
    await ctx.report_progress(1, 2)
    await anyio.sleep(60)
    return "held"


@server.tool()
async def exit_now() -> str:
    """Ends this process at once, mid-call (as a crash would)."""
    os._exit(3)


def serve_http() -> None:
    """Streamable HTTP on a free port of 127.0.0.1; its URL is the first line on stdout, printed once the
    socket listens (connections wait in its backlog until the server takes them)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(partial(uvicorn.Server(config).serve, sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:
        serve_http()
    else:
        server.run("stdio")
