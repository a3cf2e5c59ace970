"""Pinned definitions (#36) with real parts: the rug-pull backend changes its tool after it was trusted, and
the official SDK's clients in both eras, on every listener, never see the change nor reach it; an operator
approves or rejects it with `mcp-gateway trust` through the admin listener."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Final

import httpx2
import mcp_types as types
import orjson
import pytest
import trio
from mcp import Client, MCPError
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from sdk_websocket import websocket_client
from support import (
    DEADLINE_S,
    Notifications,
    connect,
    running,
    sdk_client,
    toml_value,
    tool_names,
    with_http,
    with_websocket,
)
from trust_support import rugpull_config

MODERN: Final = "2026-07-28"
CHANGED: Final = "notifications/tools/list_changed"


async def fetched(client: Client) -> int:
    """How many calls of `fetch` reached the backend."""
    return int((await client.call_tool("fetched", {})).structured_content["fetched"])  # type: ignore[index]


async def names_now(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]


def held_rows(tmp_path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(tmp_path / "trust.sqlite3") as db:
        return list(db.execute("SELECT backend, kind, name FROM held"))


async def refused_as_held(client: Client, tool: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.call_tool(tool, {"url": "https://example.com"})
    error = refused.value.error
    assert error.code == -32602
    assert "backend 'rugpull'" in error.message and "held for review" in error.message
    return error.message


async def test_a_rug_pull_after_n_calls_is_held_in_both_eras_on_every_listener(tmp_path: Path) -> None:
    config = with_http(with_websocket(rugpull_config(tmp_path, "--change-after", "2")))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        heard = Notifications()
        async with (
            websocket_client(gateway.websocket_url, message_handler=heard.handle) as legacy,
            Client(streamable_http_client(gateway.http_url), mode=MODERN) as modern,
        ):
            assert "fetch" in await tool_names(legacy) and "fetch" in await names_now(modern)
            await legacy.call_tool("fetch", {"url": "https://example.com/1"})
            await modern.call_tool("fetch", {"url": "https://example.com/2"})  # the second call: the rug
            await heard.wait_for(CHANGED, 1)
            for client in (legacy, modern):
                names = await names_now(client)
                assert "fetch" not in names and {"add", "fetched"} <= set(names)
                assert "changed since it was approved" in await refused_as_held(client, "fetch")
                assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"  # type: ignore[union-attr]
            assert await fetched(legacy) == 2  # the refused calls never reached the backend
            prompts = await modern.list_prompts(cache_mode="bypass")
            assert prompts.prompts == []  # its prompt and template changed with it: held too
            templates = await legacy.list_resource_templates()
            assert templates.resource_templates == []
            with pytest.raises(MCPError) as read:
                await legacy.read_resource("pages://7")
            assert "held for review" in read.value.error.message
            with pytest.raises(MCPError) as prompt:
                await modern.get_prompt("summarize", {"id": "7"})
            assert "held for review" in prompt.value.error.message
        assert heard.count(CHANGED) == 1  # the tools it sees changed once
    assert sorted(held_rows(tmp_path)) == [
        ("rugpull", "prompt", "summarize"),
        ("rugpull", "template", "pages://{id}"),
        ("rugpull", "tool", "fetch"),
    ]


async def test_a_change_after_a_restart_and_a_rename_are_held_over_stdio(tmp_path: Path) -> None:
    """The backend restarts with a changed tool; later the gateway restarts too and its baselines with it;
    a rename with the changed body is held as a rename."""
    config = rugpull_config(tmp_path, "--change-on-restart")
    heard = Notifications()
    async with sdk_client(config, tmp_path / "one.log", heard) as client:
        assert "fetch" in await tool_names(client)
        with pytest.raises(MCPError):
            await client.call_tool("crash", {})
        await heard.wait_for(CHANGED, 2)  # gone while it restarts, back without fetch
        assert "fetch" not in await tool_names(client) and "add" in await tool_names(client)
        await refused_as_held(client, "fetch")
    async with sdk_client(config, tmp_path / "two.log", mode=MODERN) as again:  # a new gateway, same file
        names = await names_now(again)
        assert "fetch" not in names and "add" in names
        await refused_as_held(again, "fetch")
    state = tmp_path / "rugpull.json"
    state.write_bytes(orjson.dumps({**orjson.loads(state.read_bytes()), "form": "renamed"}))
    async with sdk_client(config, tmp_path / "three.log") as renamed:
        names = await tool_names(renamed)
        assert "fetch_v2" not in names and "fetch" not in names
        assert "with the body of 'fetch'" in await refused_as_held(renamed, "fetch_v2")


async def test_a_flapping_definition_keeps_one_held_record_and_a_bounded_log(tmp_path: Path) -> None:
    """A thousand forms of one tool, each listed and announced: one held record, eight events of it, and
    one list_changed for the client (what it sees changed once)."""
    config = with_websocket(rugpull_config(tmp_path))
    async with running(config) as gateway:
        assert gateway.listener is not None and gateway.websocket_url is not None
        catalog = gateway.listener.catalog
        heard = Notifications()
        async with websocket_client(gateway.websocket_url, message_handler=heard.handle) as client:
            await client.call_tool("flap", {"times": 1000})
            with trio.fail_after(DEADLINE_S * 4):
                version, view = catalog.version, catalog.value
                while not any(held.changes >= 1000 for held in view.trust.held):
                    version, view = await catalog.wait_newer(version)
            assert len(view.trust.held) == 1
            assert "fetch" not in await tool_names(client)
            assert heard.count(CHANGED) == 1
    with sqlite3.connect(tmp_path / "trust.sqlite3") as db:  # the keeper wrote what it had at the stop
        (held,) = list(db.execute("SELECT record FROM held"))
        assert orjson.loads(held[0])["changes"] >= 1000
        (events,) = db.execute("SELECT COUNT(*) FROM events WHERE name = 'fetch'").fetchone()
        assert events == 8  # its pin and seven holds: a definition's events between two decisions


TOKEN_ENV: Final = "TRUST_TEST_ADMIN_TOKEN"
TOKEN: Final = "trust-test-token-0123456789"


def with_admin_token(config: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    config.write_text(config.read_text() + f'\n[admin]\nport = 0\ntoken_env = "{TOKEN_ENV}"\n')
    return config


async def trust(url: str, *args: str, token: str | None = TOKEN) -> tuple[int, str]:
    """`mcp-gateway trust --url URL ARGS`, run as a process (the gateway answers in this one)."""
    env = {key: value for key, value in os.environ.items() if key != "MCP_GATEWAY_ADMIN_TOKEN"}
    env |= {"MCP_GATEWAY_ADMIN_TOKEN": token} if token else {}
    argv = [sys.executable, "-m", "actors", "trust", "--url", url, *args]
    with trio.fail_after(DEADLINE_S):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=env)
    return done.returncode, (done.stdout + done.stderr).decode()


async def test_operators_review_with_the_trust_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = with_admin_token(
        with_websocket(rugpull_config(tmp_path, "--change-after", "1", "--rename-after", "2")), monkeypatch
    )
    async with running(config) as gateway:
        assert gateway.admin is not None and gateway.websocket_url is not None
        url = gateway.admin.url
        heard = Notifications()
        async with websocket_client(gateway.websocket_url, message_handler=heard.handle) as client:
            code, said = await trust(url, "list")
            assert code == 0 and "nothing is held" in said and "rugpull pin" in said
            await client.call_tool("fetch", {"url": "https://example.com"})
            await heard.wait_for(CHANGED, 1)
            code, said = await trust(url, "list", token=None)
            assert code == 1 and "needs its bearer token" in said
            code, said = await trust(url, "list")
            assert code == 0 and "rugpull/fetch  tool  changed  hidden  digest " in said, said
            code, diff = await trust(url, "diff", "rugpull/fetch")
            assert code == 0, diff
            assert "findings: 2" in diff and "instruction at description" in diff
            assert "sensitive-path at description" in diff and "html-comment" not in diff
            assert '-  "description": "Fetch a URL and return its text.",' in diff
            assert '+  "description": "Fetch a URL and return its text. <IMPORTANT>' in diff
            digest = diff.split(" -> held ")[1].split()[0]
            code, said = await trust(url, "approve", "rugpull/fetch", "--digest", "0" * 12)
            assert code == 1 and "changed since it was reviewed" in said
            code, said = await trust(url, "approve", "rugpull/nothing")
            assert code == 1 and "nothing is held under rugpull/nothing" in said
            code, said = await trust(url, "approve", "rugpull/fetch", "--digest", digest[:12], "--by", "ana")
            assert code == 0 and f"approved tool rugpull/fetch (digest {digest[:12]})" in said
            await heard.wait_for(CHANGED, 2)
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert "<IMPORTANT>" in (listed["fetch"].description or "")  # approved as it is now
            await client.call_tool("fetch", {"url": "https://example.com"})  # the second call: a rename
            await heard.wait_for(CHANGED, 3)
            assert {"fetch", "fetch_v2"}.isdisjoint(await tool_names(client))
            code, said = await trust(url, "list")
            assert "rugpull/fetch_v2  tool  renamed from fetch  hidden" in said
            code, said = await trust(url, "reject", "rugpull/fetch_v2", "--by", "ana")
            assert code == 0 and "rejected tool rugpull/fetch_v2" in said
            code, said = await trust(url, "list")
            assert "rugpull/fetch_v2  tool  renamed from fetch  rejected" in said
            await refused_as_held(client, "fetch_v2")
            assert heard.count(CHANGED) == 3  # a rejection changes nothing a client sees
            assert await fetched(client) == 2
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http:
            log = (await http.get(f"{url}/trust")).json()["events"]
            approved = next(event for event in log if event["event"] == "approved")
            assert approved["by"] == "ana (127.0.0.1)" and approved["new"] == digest
            assert approved["old"] is not None and approved["old"] != digest
            status = (await http.get(f"{url}/status")).json()
            held = {entry["id"] for entry in status["trust"]["held"]}
            assert held == {"rugpull/fetch_v2", "rugpull/summarize", "rugpull/pages://{id}"}
            assert status["backends"][0]["trust"] == {"mode": "pin", "hidden": 3}


async def test_the_trust_routes_need_the_admin_token_and_refuse_bad_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_config = rugpull_config(tmp_path)
    open_config.write_text(open_config.read_text() + "\n[admin]\nport = 0\n")
    async with running(open_config) as gateway, httpx2.AsyncClient() as http:
        assert gateway.admin is not None
        for method, path in (("GET", "/trust"), ("GET", "/trust/diff?name=a/b"), ("POST", "/trust/approve")):
            answer = await http.request(method, gateway.admin.url + path, json={})
            assert answer.status_code == 403 and "token_env" in answer.json()["error"]
    config = with_admin_token(rugpull_config(tmp_path), monkeypatch)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with running(config) as gateway, httpx2.AsyncClient(headers=bearer) as http:
        assert gateway.admin is not None
        approve = gateway.admin.url + "/trust/approve"
        assert (await http.get(approve)).status_code == 405
        assert (await http.post(gateway.admin.url + "/trust")).status_code == 405
        for body, status in (
            (b"not json", 400),
            (b"[1]", 400),
            (orjson.dumps({"name": 7}), 400),
            (orjson.dumps({"name": "no-slash"}), 400),
            (orjson.dumps({"name": "a/b", "kind": "widget"}), 400),
            (orjson.dumps({"name": "a/b", "digest": "xyz"}), 400),
            (orjson.dumps({"name": "a/b", "by": ["x"]}), 400),
            (orjson.dumps({"name": "a/b\x1b[2J"}), 404),
            (b"{" + b" " * 20_000 + b"}", 413),
        ):
            answer = await http.post(approve, content=body)
            assert answer.status_code == status, (body[:40], answer.text)
            assert "\x1b" not in answer.text


async def test_hostile_definitions_are_scanned_held_and_kept_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MB description, a schema 240 JSON levels deep and hidden and control characters, under trust =
    "scan": the too-large and the hidden are held with their findings, the deep one (nothing to find) is
    listed and called, and what is kept of the 1 MB one is its 64 KiB review text. (Raw frames: the SDK's
    client does not take a schema that deep.)"""
    flags = ("--huge", str(1 << 20), "--deep", "120", "--controls")
    config = with_admin_token(with_websocket(rugpull_config(tmp_path, *flags, trust="scan")), monkeypatch)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.admin is not None
        async with connect(gateway.websocket_url) as client:
            await client.request(2, "tools/list", {})
            names = [tool["name"] for tool in (await client.answer_to(2))["result"]["tools"]]
            assert {"fetch", "add", "deep"} <= set(names) and {"huge", "controls"}.isdisjoint(names)
            await client.call(3, "deep")
            assert (await client.answer_to(3))["result"]["content"][0]["text"] == "deep called"
            for number, tool in enumerate(("huge", "controls"), start=4):
                await client.call(number, tool)
                error = (await client.answer_to(number))["error"]
                assert "the scan of its definition found something" in error["message"]
        bearer = {"authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=bearer, timeout=DEADLINE_S) as http:
            diff_of = gateway.admin.url + "/trust/diff"
            diff = (await http.get(diff_of, params={"name": "rugpull/controls"})).json()
            kinds = {finding["kind"] for finding in diff["findings"]}
            assert {"hidden", "control", "html-comment", "instruction", "sensitive-path"} <= kinds
            assert "\\u200b" in diff["diff"] and "\\u001b" in diff["diff"] and "\u200b" not in diff["diff"]
            huge = (await http.get(diff_of, params={"name": "rugpull/huge"})).json()
            assert huge["findings"][0]["kind"] == "too-large"
    with sqlite3.connect(tmp_path / "trust.sqlite3") as db:
        sizes = dict(db.execute("SELECT name, LENGTH(record) FROM held"))
        assert set(sizes) == {"huge", "controls"} and sizes["huge"] < 80_000
        (largest,) = db.execute("SELECT MAX(LENGTH(text)) FROM baselines").fetchone()
        assert largest < 80_000


async def test_a_trust_store_that_cannot_be_opened_stops_the_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the store's folder should be")
    config = rugpull_config(tmp_path)
    config.write_text(
        config.read_text().replace(str(tmp_path / "trust.sqlite3"), str(tmp_path / "taken" / "t.db"))
    )
    argv = [sys.executable, "-m", "actors", "tools", "--config", str(config)]
    with trio.fail_after(DEADLINE_S):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    said = done.stderr.decode()
    (line,) = [line for line in said.splitlines() if "trust store" in line]
    assert done.returncode == 1 and "Traceback" not in said, said
    assert line.startswith("mcp-gateway: cannot open the trust store: ") and "taken: File exists" in line


@pytest.mark.parametrize("audited", [False, True])
async def test_a_held_tool_is_refused_before_its_approval_is_asked(tmp_path: Path, audited: bool) -> None:
    """An approve rule on `fetch`: its first call is asked and runs (and pulls the rug); the next is refused
    as held without asking the user (with [audit] too, where calls go through the middleware)."""
    config = rugpull_config(tmp_path, "--change-after", "1")
    rule = '[policy]\n[[policy.rules]]\neffect = "approve"\nwhen = \'mcp.tool.name == "fetch"\'\n'
    audit = f"[audit]\npath = {toml_value(str(tmp_path / 'audit.sqlite3'))}\n" if audited else ""
    config.write_text(config.read_text() + rule + audit)
    asked: list[types.ElicitRequestParams] = []

    async def accept(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={})

    heard = Notifications()
    async with sdk_client(config, tmp_path / "g.log", heard, elicitation_callback=accept) as client:
        assert not (await client.call_tool("fetch", {"url": "https://example.com"})).is_error
        await heard.wait_for(CHANGED, 1)
        await refused_as_held(client, "fetch")
        assert len(asked) == 1 and await fetched(client) == 1
