#!/usr/bin/env python3
"""A 2026-07-28 backend on the official Python SDK 2.3 (MCPServer over stdio) whose tools take several
rounds of `input_required`, for the tests of what the gateway does with each round.

`three_rounds(text)` asks twice (an elicitation under `step1`, then under `step2`), then answers with the
`text` it was given in each round (its state carries them), so a test sees what arrived each time.
`acts` says how many times the tools above ran. `ask_roots` asks only for roots/list (key `roots`);
`ask_roots_and_name` asks for roots and a name in one round (keys `roots`, `who`); each answers with what
it got.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
)

server = MCPServer("sdk-rounds")
acted = [0]


def ask_name(message: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def answer(ctx: Context, key: str) -> Any:
    return (ctx.input_responses or {}).get(key)


@server.tool()
async def three_rounds(ctx: Context, text: str) -> str | InputRequiredResult:
    """Asks twice, then says which text it was given in each round."""
    acted[0] += 1
    seen: list[str] = json.loads(ctx.request_state) if ctx.request_state else []
    seen.append(text)
    if len(seen) == 1:
        return InputRequiredResult(
            input_requests={"step1": ask_name("first?")}, request_state=json.dumps(seen)
        )
    if len(seen) == 2 and isinstance(answer(ctx, "step1"), ElicitResult):
        return InputRequiredResult(
            input_requests={"step2": ask_name("second?")}, request_state=json.dumps(seen)
        )
    return " | ".join(seen)


@server.tool()
def acts() -> int:
    """How many times three_rounds ran."""
    return acted[0]


def roots_of(ctx: Context) -> str | None:
    listed = answer(ctx, "roots")
    if isinstance(listed, ListRootsResult):
        return ",".join(str(root.uri) for root in listed.roots)
    return None


@server.tool()
async def ask_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks for the roots alone."""
    roots = roots_of(ctx)
    if roots is None:
        return InputRequiredResult(input_requests={"roots": ListRootsRequest()})
    return f"roots: {roots}"


@server.tool()
async def ask_roots_and_name(ctx: Context) -> str | InputRequiredResult:
    """Asks for the roots and a name in one round."""
    roots, who = roots_of(ctx), answer(ctx, "who")
    if roots is None or not isinstance(who, ElicitResult):
        return InputRequiredResult(input_requests={"roots": ListRootsRequest(), "who": ask_name("name?")})
    name = who.content.get("name") if who.action == "accept" and who.content else who.action
    return f"roots: {roots}; name: {name}"


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
