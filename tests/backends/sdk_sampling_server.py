#!/usr/bin/env python3
"""A stdio backend built on the official Python SDK (MCPServer) whose tools ask the client while they run:
`sample` asks once, `sample_twice` asks, then asks again with the first answer; `echo` and the resource
sdk://readme ask nothing. What the gateway sees is exactly what the SDK puts on the wire: its requests' trace
context, and in the 2026-07-28 era (the SDK speaks both) that era's result fields."""

from __future__ import annotations

import warnings

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")  # sampling is deprecated as of 2026-07-28; legacy clients still take it

server = MCPServer("sdk-sampling")


async def _ask(ctx: Context, text: str) -> str:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    result = await ctx.session.create_message([message], max_tokens=10)
    content = result.content
    return content.text if isinstance(content, types.TextContent) else repr(content)


@server.tool()
async def sample(text: str, ctx: Context) -> str:
    """Ask the client to sample `text`; answer what it said."""
    return await _ask(ctx, text)


@server.tool()
async def sample_twice(text: str, ctx: Context) -> str:
    """Ask the client to sample `text`, then to sample its first answer; answer both."""
    first = await _ask(ctx, text)
    second = await _ask(ctx, f"again: {first}")
    return f"{first} | {second}"


@server.tool()
async def echo(text: str) -> str:
    """Answer `text`."""
    return text


@server.resource("sdk://readme")
async def readme() -> str:
    """A resource to read."""
    return "read me"


if __name__ == "__main__":
    server.run("stdio")
