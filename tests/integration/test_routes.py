"""[[routes]] through a real gateway (in this process): official SDK clients over real WebSockets and
Streamable HTTP, tokens from `mcp-gateway token`, a real backend process. One gateway serves the whole
catalog at /mcp and three routes, /dev, /find (/dev's tools in search mode) and /ops; every (path,
principal) pair's list, its direct calls, its searches and call_tool agree on every tool (a tool a route
does not list is as unknown through it as a name nobody has)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from sdk_websocket import websocket_client
from support import (
    LEGACY_ERA,
    Notifications,
    backend_entry,
    running,
    tool_names,
    with_http,
    with_websocket,
    write_config,
)

SECRET: Final = "routes-test-secret-that-is-long-enough"
VARIABLE: Final = "ROUTES_TEST_SECRET"
AUTH: Final = {"jwt_secret_env": VARIABLE}
POLICY: Final = """
[policy]
default = "allow"
[[policy.rules]]
name = "bob adds nothing"
effect = "deny"
when = 'principal.subject == "bob" && mcp.tool.name == "add"'
"""
ROUTES: Final = """
[[routes]]
name = "dev"
paths = ["/dev"]
exclude = ["crash"]
[routes.tools.echo]
name = "say"
description = "Says what this route fixed."
hide = { text = "fixed by the route" }

[[routes]]
name = "find"
paths = ["/find"]
exclude = ["crash"]
[routes.discovery]
mode = "search"
[routes.tools.echo]
name = "say"
hide = { text = "fixed by the route" }

[[routes]]
name = "ops"
paths = ["/ops"]
include = ["pid", "crash"]
"""
EVERY_NAME: Final = ("add", "crash", "echo", "pid", "say")  # every name any path shows, and "echo" renamed
EXPECTED: Final = {  # (path, subject) -> what it lists, so what it may call
    ("/mcp", "alice"): ["add", "crash", "echo", "pid"],
    ("/mcp", "bob"): ["crash", "echo", "pid"],
    ("/dev", "alice"): ["add", "pid", "say"],
    ("/dev", "bob"): ["pid", "say"],
    ("/ops", "alice"): ["crash", "pid"],
    ("/ops", "bob"): ["crash", "pid"],
}
CALLS: Final = {"add": {"a": 1, "b": 2}, "crash": None, "echo": {"text": "hi"}, "pid": {}, "say": {}}


def token(config: Path, subject: str) -> str:
    env = {**os.environ, VARIABLE: SECRET}
    argv = [sys.executable, "-m", "actors", "token", "--config", str(config), "--sub", subject]
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()


def at(url: str, path: str) -> str:
    return url.rsplit("/", 1)[0] + path


async def called(client: Client, name: str) -> bool:
    """Whether a direct call of `name` reached a tool (crash is not called: a call that would end the
    backend; its refusal by name is what counts, so it is asked with arguments its schema refuses)."""
    try:
        result = await client.call_tool(name, CALLS[name] or {"unexpected": 1})
    except MCPError as error:
        if "Unknown tool" in error.error.message:
            return False
        assert name == "crash", error.error.message  # known, refused only for its arguments
        return True
    return not result.is_error or name == "crash"


async def call_through(client: Client, arguments: dict[str, object]) -> bool:
    """Whether search mode's call_tool reached the named tool."""
    try:
        result = await client.call_tool("call_tool", arguments)
    except MCPError as error:
        assert "Unknown tool" in error.error.message, error.error.message
        return False
    return not result.is_error


async def test_each_path_and_principal_lists_exactly_what_it_may_call_and_a_reload_tells_only_its_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,add,pid,crash")])
    config = with_http(with_websocket(config, auth=AUTH), auth=AUTH)
    config.write_text(config.read_text() + POLICY + ROUTES)
    tokens = {subject: token(config, subject) for subject in ("alice", "bob")}
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        for (path, subject), listed in EXPECTED.items():
            headers = [("authorization", f"Bearer {tokens[subject]}")]
            async with websocket_client(at(gateway.websocket_url, path), headers) as client:
                assert sorted(await tool_names(client)) == listed, (path, subject)
                reached = [name for name in EVERY_NAME if name != "crash" and await called(client, name)]
                assert reached == [name for name in listed if name != "crash"], (path, subject)
        for subject in ("alice", "bob"):  # search mode: search and call_tool agree with /dev's list
            headers = [("authorization", f"Bearer {tokens[subject]}")]
            allowed = EXPECTED["/dev", subject]
            async with websocket_client(at(gateway.websocket_url, "/find"), headers) as client:
                assert sorted(await tool_names(client)) == ["call_tool", "get_tool_schema", "search_tools"]
                for name in EVERY_NAME:
                    found = await client.call_tool("search_tools", {"query": name, "limit": 20})
                    names = {row["name"] for row in found.structured_content["tools"]}  # type: ignore[index]
                    assert names <= set(allowed) and (name in names) == (name in allowed), (subject, name)
                    if name == "crash":
                        continue
                    arguments = {"name": name, "arguments": CALLS[name]}
                    result = await call_through(client, arguments)
                    assert result == (name in allowed), (subject, name)
        alice = [("authorization", f"Bearer {tokens['alice']}")]
        async with websocket_client(at(gateway.websocket_url, "/dev"), alice) as client:
            said = await client.call_tool("say", {})  # the renamed echo, with the route's fixed argument
            assert said.content[0].text == "fixed by the route"  # type: ignore[union-attr]
            (say,) = [tool for tool in (await client.list_tools()).tools if tool.name == "say"]
            assert say.description == "Says what this route fixed." and "text" not in say.input_schema.get(
                "properties", {}
            )
            with pytest.raises(MCPError) as fixed:
                await client.call_tool("say", {"text": "mine"})
            assert (
                fixed.value.error.code == -32602
                and "fixed by this endpoint's route" in fixed.value.error.message
            )
        async with (  # Streamable HTTP reaches the same route by the same path
            httpx2.AsyncClient(headers=dict(alice)) as http,
            Client(
                streamable_http_client(at(gateway.http_url, "/dev"), http_client=http), mode=LEGACY_ERA
            ) as client,
        ):
            assert sorted(await tool_names(client)) == EXPECTED["/dev", "alice"]
        dev_seen, ops_seen = Notifications(), Notifications()
        async with (
            websocket_client(
                at(gateway.websocket_url, "/dev"), alice, message_handler=dev_seen.handle
            ) as dev,
            websocket_client(
                at(gateway.websocket_url, "/ops"), alice, message_handler=ops_seen.handle
            ) as ops,
        ):
            assert sorted(await tool_names(ops)) == ["crash", "pid"]
            config.write_text(
                config.read_text().replace('include = ["pid", "crash"]', 'include = ["pid", "add"]')
            )
            outcome = await gateway.reload("a test")
            assert outcome.ok, outcome.lines
            await ops_seen.wait_for("notifications/tools/list_changed", 1)
            assert sorted(await tool_names(ops)) == ["add", "pid"]
            assert sorted(await tool_names(dev)) == EXPECTED["/dev", "alice"]  # a round trip after the news
            assert dev_seen.count("notifications/tools/list_changed") == 0  # its route did not change


def test_a_rename_onto_another_tools_name_and_a_path_taken_twice_fail_the_load(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha")])
    config = with_websocket(config)
    config.write_text(
        config.read_text()
        + ROUTES.replace('paths = ["/ops"]', 'paths = ["/dev"]')
        + '[routes.tools.add]\nname = "pid"\n[routes.tools.pid]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{config}: routes[2].paths: /dev is already route 'dev''s" in done.stderr
    assert f"{config}: routes[2].tools.pid.name: 'pid' is also the name of 'add' here" in done.stderr
    assert "Traceback" not in done.stderr


NARROWING: Final = """
[policy]
default = "allow"
[[policy.rules]]
name = "bob echoes nothing"
effect = "deny"
when = 'principal.subject == "bob" && mcp.tool.name == "echo"'

[[routes]]
name = "alias"
paths = ["/alias"]
include = ["echo", "add", "pid"]
[routes.tools.echo]
name = "say"
[routes.policy]
default = "allow"
[[routes.policy.rules]]
name = "no pid here"
effect = "deny"
when = 'mcp.tool.name == "pid"'
[[routes.policy.rules]]
name = "tries to widen"
effect = "allow"
when = 'mcp.tool.name == "echo"'
"""
NARROWED: Final = {  # (path, subject) -> what it lists and may call
    ("/mcp", "alice"): ["add", "echo", "pid"],
    ("/mcp", "bob"): ["add", "pid"],
    ("/alias", "alice"): ["add", "say"],
    ("/alias", "bob"): ["add"],  # "say" is echo: the gateway's rule on "echo" holds under its new name
}


async def test_a_routes_policy_narrows_the_gateways_and_a_rename_is_judged_by_the_catalog_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,add,pid")])
    config = with_websocket(config, auth=AUTH)
    config.write_text(config.read_text() + NARROWING)
    tokens = {subject: token(config, subject) for subject in ("alice", "bob")}
    monkeypatch.setenv(VARIABLE, SECRET)
    calls = {**CALLS, "say": {"text": "hi"}}
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        for (path, subject), listed in NARROWED.items():
            headers = [("authorization", f"Bearer {tokens[subject]}")]
            async with websocket_client(at(gateway.websocket_url, path), headers) as client:
                assert sorted(await tool_names(client)) == listed, (path, subject)
                for name in ("add", "echo", "pid", "say"):
                    try:
                        result = await client.call_tool(name, calls[name])
                        reached = not result.is_error
                    except MCPError as error:
                        assert "Unknown tool" in error.error.message, error.error.message
                        reached = False
                    assert reached == (name in listed), (path, subject, name)
        alice = [("authorization", f"Bearer {tokens['alice']}")]
        seen = Notifications()
        async with websocket_client(
            at(gateway.websocket_url, "/alias"), alice, message_handler=seen.handle
        ) as client:
            config.write_text(config.read_text().replace('mcp.tool.name == "pid"', 'mcp.tool.name == "add"'))
            outcome = await gateway.reload("a test")
            assert outcome.ok, outcome.lines
            await seen.wait_for("notifications/tools/list_changed", 1)
            assert sorted(await tool_names(client)) == ["pid", "say"]  # the route's new rules, at once
            with pytest.raises(MCPError, match="Unknown tool: add"):
                await client.call_tool("add", calls["add"])
        renamed = '[routes.tools.echo]\nname = "say"'
        config.write_text(config.read_text().replace(renamed, renamed.replace("say", "pid")))
        refused = await gateway.reload("a test")  # onto a name the catalog has now, shown by the route too
        assert not refused.ok
        reason = "routes[0].tools.echo.name: 'pid' is the public name of alpha's tool 'pid', shown here too"
        assert refused.lines == (f"{config}: {reason}",)


def test_a_routes_policy_is_checked_at_load_under_its_key(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha")])
    config = with_websocket(config)
    bad = NARROWING.replace("when = 'mcp.tool.name == \"pid\"'", "when = 'mcp.tool.nme =='")
    config.write_text(config.read_text() + bad)
    done = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{config}: routes[0].policy.rules[0].when: not a CEL expression" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
