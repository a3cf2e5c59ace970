"""Every round of a call that asks for input passes the middleware and lands in the audit: a real modern
backend (the SDK 2.3 server of tests/backends/sdk_rounds.py) asks twice before it answers, and the official
SDK client answers, in each era (a modern client retries; for a legacy client the gateway's shim does)."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import pytest
import trio
from example_middleware import REFUSED
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError
from support import ROOT, SESSION_DEADLINE_S, gateway_argv, write_config

MODERN: Final = "2026-07-28"
LEGACY: Final = "legacy"
ROUNDS_BACKEND: Final = ROOT / "tests" / "backends" / "sdk_rounds.py"


def rounds_backend(**settings: Any) -> dict[str, Any]:
    argv = [str(ROUNDS_BACKEND)]
    return {"name": "r", "command": sys.executable, "args": argv, "era": "modern", **settings}


def config_with(path: Path, *middleware: str, **backend: Any) -> Path:
    config = write_config(path, [rounds_backend(**backend)])
    audit = f'[audit]\npath = "{path.parent / "audit.sqlite3"}"\n'
    config.write_text(config.read_text() + "\n" + "\n".join(middleware) + "\n" + audit)
    return config


@asynccontextmanager
async def client_of(config: Path, era: str, **options: Any) -> AsyncIterator[Client]:
    """The SDK client over stdio to a gateway subprocess that can import tests/example_middleware.py."""
    argv = gateway_argv(config, config.with_name("gateway.log"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)
    with trio.fail_after(SESSION_DEADLINE_S):
        async with Client(params, mode=era, **options) as client:
            yield client


def audit_rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM calls ORDER BY id")]


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content)


PREFIX: Final = '[[middleware]]\nuse = "example_middleware.PrefixText"\noptions = { prefix = ">" }\n'


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_an_argument_rewrite_applies_to_every_round_and_each_round_is_audited(
    tmp_path: Path, era: str
) -> None:
    config = config_with(tmp_path / "g.toml", PREFIX)
    async with client_of(config, era, elicitation_callback=elicit) as client:
        said = text_of(await client.call_tool("three_rounds", {"text": "a"}))
        assert text_of(await client.call_tool("acts", {})) == "3"
    assert said == ">a | >a | >a"  # the backend got the rewritten text in each round
    rows = [row for row in audit_rows(tmp_path / "audit.sqlite3") if row["tool"] == "three_rounds"]
    assert [(row["round"], row["outcome"]) for row in rows] == [
        (1, "input_required"),
        (2, "input_required"),
        (3, "ok"),
    ]
    assert len({row["call_id"] for row in rows}) == 1 and rows[0]["call_id"]


QUOTA: Final = (
    '[[middleware]]\nuse = "example_middleware.Quota"\noptions = { tool = "three_rounds", limit = 2 }\n'
)


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_quota_counts_every_round_and_refuses_the_one_past_it(tmp_path: Path, era: str) -> None:
    config = config_with(tmp_path / "g.toml", QUOTA)
    async with client_of(config, era, elicitation_callback=elicit) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("three_rounds", {"text": "a"})
        assert refused.value.error.code == REFUSED
        assert text_of(await client.call_tool("acts", {})) == "2"  # the third round never reached it
    rows = [row for row in audit_rows(tmp_path / "audit.sqlite3") if row["tool"] == "three_rounds"]
    assert [(row["round"], row["outcome"]) for row in rows] == [
        (1, "input_required"),
        (2, "input_required"),
        (3, "rejected"),
    ]


CONFIGURED: Final = ("file:///srv/a", "file:///srv/b")


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_configured_roots_answer_a_modern_backends_ask_and_the_client_is_never_asked(
    tmp_path: Path, era: str
) -> None:
    asked: list[str] = []

    async def client_roots(context: ClientRequestContext) -> types.ListRootsResult:
        asked.append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri="file:///client")])

    config = config_with(tmp_path / "g.toml", roots=list(CONFIGURED))
    options = {"elicitation_callback": elicit, "list_roots_callback": client_roots}
    async with client_of(config, era, **options) as client:
        alone = text_of(await client.call_tool("ask_roots", {}))  # the backend called again at once
        mixed = text_of(await client.call_tool("ask_roots_and_name", {}))  # the client: for the name only
    assert alone == "roots: file:///srv/a,file:///srv/b"
    assert mixed == "roots: file:///srv/a,file:///srv/b; name: Ada"
    assert asked == []


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_roots_none_refuses_a_modern_backends_ask_for_roots(tmp_path: Path, era: str) -> None:
    config = config_with(tmp_path / "g.toml", roots="none")
    async with client_of(config, era, elicitation_callback=elicit) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("ask_roots", {})
    assert "offers it none" in refused.value.error.message


STDIO_POLICY: Final = """
[stdio]
subject = "editor"
scopes = ["rounds"]
[policy]
default = "deny"
[[policy.rules]]
name = "editors run rounds"
when = 'principal.subject == "editor" && "rounds" in scopes && mcp.tool.name == "three_rounds"'
[limits]
calls_per_s = 0.01
burst = 1
"""


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_stdio_principals_call_is_judged_every_round_and_counted_once(
    tmp_path: Path, era: str
) -> None:
    """[stdio] names the caller the rules read; each round of a call is judged (the audit names the rule on
    every round) while [limits] counts the call once: a burst of 1 lets all three rounds through."""
    config = config_with(tmp_path / "g.toml", STDIO_POLICY)
    async with client_of(config, era, elicitation_callback=elicit) as client:
        assert text_of(await client.call_tool("three_rounds", {"text": "a"})) == "a | a | a"
        limited = await client.call_tool("three_rounds", {"text": "b"})  # the call after it is counted
        assert limited.is_error and "rate limited" in limited.content[0].text
    rows = [row for row in audit_rows(tmp_path / "audit.sqlite3") if row["tool"] == "three_rounds"]
    assert [(row["round"], row["outcome"], row["decision"], row["rule"]) for row in rows] == [
        (1, "input_required", "allow", "editors run rounds"),
        (2, "input_required", "allow", "editors run rounds"),
        (3, "ok", "allow", "editors run rounds"),
        (1, "rejected", "allow", "editors run rounds"),
    ]
    assert {row["subject"] for row in rows} == {"editor"}
