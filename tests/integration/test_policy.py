"""[policy] and [limits] through a real gateway (in this process): official SDK clients over real
WebSockets and Streamable HTTP, tokens made by `mcp-gateway token`, real backend processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from admin_support import sample
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, PromptReference
from sdk_websocket import websocket_client
from support import (
    LEGACY_ERA,
    Notifications,
    backend_entry,
    raw_gateway,
    running,
    sdk_client,
    tool_names,
    with_http,
    with_websocket,
    write_config,
)
from ts_modern import modern_server_argv

from actors.policy.context import client_key
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY

SECRET: Final = "policy-test-secret-that-is-long-enough"
VARIABLE: Final = "POLICY_TEST_SECRET"
AUTH: Final = {"jwt_secret_env": VARIABLE}
TOOLS: Final = "--only=echo,add,pid,crash"
RULES: Final = """
[policy]
default = "deny"
[[policy.rules]]
name = "everyone"
when = 'mcp.tool.name in ["echo", "pid"]'
[[policy.rules]]
name = "admins"
when = '"tools:admin" in scopes'
[[policy.rules]]
name = "bob never crashes"
effect = "deny"
when = 'principal.subject == "bob" && mcp.tool.name == "crash"'
"""


def token(config: Path, subject: str, *scopes: str) -> str:
    """A token from the gateway's own command, as an operator would make it."""
    env = {**os.environ, VARIABLE: SECRET}
    argv = [sys.executable, "-m", "actors", "token", "--config", str(config), "--sub", subject]
    argv += [arg for scope in scopes for arg in ("--scope", scope)]
    made = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    return made.stdout.strip()


def bearer(value: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {value}")]


def gateway_config(tmp_path: Path, *extra: str) -> Path:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]), auth=AUTH)
    config = with_http(config, auth=AUTH)
    config.write_text(config.read_text() + "\n".join(extra))
    return config


def audit_rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM calls ORDER BY id")]


def text_of(result: Any) -> str:
    return result.content[0].text  # type: ignore[no-any-return]


async def test_two_principals_see_and_call_different_tools_and_a_denied_call_never_reaches_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_config(tmp_path, RULES, '[audit]\npath = "audit.sqlite3"\n')
    alice, bob = token(config, "alice", "tools:admin"), token(config, "bob", "tools:admin")
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url, bearer(alice)) as client:
            assert sorted(await tool_names(client)) == ["add", "crash", "echo", "pid"]
            assert text_of(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
        async with websocket_client(gateway.websocket_url, bearer(bob)) as client:
            assert sorted(await tool_names(client)) == ["add", "echo", "pid"]  # the deny rule wins
            before = await client.call_tool("pid", {})
            with pytest.raises(MCPError) as denied:
                await client.call_tool("crash", {})
            assert denied.value.error.code == -32602 and "Unknown tool: crash" in denied.value.error.message
            after = await client.call_tool("pid", {})
            assert after.structured_content == before.structured_content  # the crash never reached it
    rows = audit_rows(tmp_path / "audit.sqlite3")
    assert [(r["subject"], r["tool"], r["outcome"], r["decision"], r["rule"]) for r in rows] == [
        ("alice", "add", "ok", "allow", "admins"),
        ("bob", "pid", "ok", "allow", "everyone"),
        ("bob", "crash", "rejected", "deny", "bob never crashes"),
        ("bob", "pid", "ok", "allow", "everyone"),
    ]


async def test_a_caller_over_its_rate_gets_a_tool_error_and_a_new_session_does_not_refill_its_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_config(tmp_path, "[limits]\ncalls_per_s = 0.01\nburst = 2\n[admin]\nport = 0\n")
    alice, bob = token(config, "alice"), token(config, "bob")
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        async with websocket_client(gateway.websocket_url, bearer(alice)) as client:
            for n in range(2):
                assert text_of(await client.call_tool("echo", {"text": f"call {n}"})) == f"call {n}"
            limited = await client.call_tool("echo", {"text": "one too many"})
            assert limited.is_error and text_of(limited) == "rate limited, retry in 100 s"
        async with websocket_client(gateway.websocket_url, bearer(alice)) as client:  # a new session
            assert (await client.call_tool("echo", {"text": "again"})).is_error
        http = httpx2.AsyncClient(headers=dict(bearer(alice)))
        async with (  # the same principal on another listener: the same bucket
            http,
            Client(streamable_http_client(gateway.http_url, http_client=http), mode=LEGACY_ERA) as client,
        ):
            assert (await client.call_tool("echo", {"text": "over http"})).is_error
        async with websocket_client(gateway.websocket_url, bearer(bob)) as client:
            assert text_of(await client.call_tool("echo", {"text": "bob"})) == "bob"  # his own bucket
        assert gateway.admin is not None
        async with httpx2.AsyncClient() as http:
            metrics = (await http.get(gateway.admin.listener.url + "/metrics")).text
    assert sample(metrics, "mcp_gateway_limit_refusals_total", kind="rate") == 3
    assert sample(metrics, "mcp_gateway_limit_refusals_total", kind="inflight") == 0
    assert sample(metrics, "mcp_gateway_limit_admitted_total") == 3


async def test_without_auth_another_loopback_address_on_the_other_listener_shares_the_bucket(
    tmp_path: Path,
) -> None:
    """Sessions count every loopback address as one client on both listeners; so do [limits]: a client
    over its rate on the WebSocket from 127.0.0.1 is over it on HTTP from 127.0.0.2 too."""
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]))
    config = with_http(config)
    config.write_text(config.read_text() + "[limits]\ncalls_per_s = 0.01\nburst = 2\n")
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            for n in range(2):
                assert text_of(await client.call_tool("echo", {"text": f"call {n}"})) == f"call {n}"
            assert (await client.call_tool("echo", {"text": "one too many"})).is_error
        transport = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
        async with (
            httpx2.AsyncClient(transport=transport) as http,
            Client(streamable_http_client(gateway.http_url, http_client=http), mode=LEGACY_ERA) as client,
        ):
            limited = await client.call_tool("echo", {"text": "from another loopback address"})
            assert limited.is_error and text_of(limited).startswith("rate limited")


async def test_a_reload_swaps_the_rules_and_tells_sessions_whose_tools_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_config(tmp_path, RULES)
    bob = token(config, "bob")
    monkeypatch.setenv(VARIABLE, SECRET)
    seen = Notifications()
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(
            gateway.websocket_url, bearer(bob), message_handler=seen.handle
        ) as client:
            assert sorted(await tool_names(client)) == ["echo", "pid"]
            told = seen.count("notifications/tools/list_changed")
            config.write_text(config.read_text().replace('["echo", "pid"]', '["echo", "add"]'))
            outcome = await gateway.reload("a test")
            assert outcome.ok and "new [policy]" in outcome.lines[0]
            await seen.wait_for("notifications/tools/list_changed", told + 1)
            assert sorted(await tool_names(client)) == ["add", "echo"]
            with pytest.raises(MCPError):
                await client.call_tool("pid", {})  # the old rules are gone whole


PER_KIND: Final = """
[policy]
default = "deny"
[[policy.rules]]
when = 'mcp.tool.name in ["echo", "add"] || mcp.prompt.name == "greet"'
[[policy.rules]]
when = 'mcp.resource.uri.startsWith("test://alpha/")'
"""


@pytest.mark.parametrize("mode", [LEGACY_ERA, "2026-07-28"])
async def test_every_list_is_filtered_and_paged_and_every_named_target_is_refused_in_both_eras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    backend = backend_entry("alpha", TOOLS, "--prompts", "--resources")
    config = with_http(write_config(tmp_path / "g.toml", [backend], page_size=1), auth=AUTH)
    config.write_text(config.read_text() + PER_KIND)
    bob = token(config, "bob")
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.http_url is not None
        http = httpx2.AsyncClient(headers=dict(bearer(bob)))
        async with (
            http,
            Client(streamable_http_client(gateway.http_url, http_client=http), mode=mode) as client,
        ):
            first = await client.list_tools(cache_mode="bypass")
            assert [tool.name for tool in first.tools] == ["echo"] and first.next_cursor is not None
            second = await client.list_tools(cursor=first.next_cursor, cache_mode="bypass")
            assert [tool.name for tool in second.tools] == ["add"] and second.next_cursor is None
            assert [p.name for p in (await client.list_prompts()).prompts] == ["greet"]
            assert [str(r.uri) for r in (await client.list_resources()).resources] == ["test://alpha/readme"]
            assert (await client.list_resource_templates()).resource_templates == []
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("summarize", {"text": "x"})
            assert prompt.value.error.code == -32602
            with pytest.raises(MCPError) as read:
                await client.read_resource("test://shared")
            assert "Resource not found" in read.value.error.message
            with pytest.raises(MCPError):
                await client.call_tool("crash", {})
            assert text_of(await client.call_tool("echo", {"text": "allowed"})) == "allowed"
    assert gateway.policy.decisions[("tools/call", "deny")] == 1


async def test_over_the_http_request_limit_a_client_gets_429_with_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_config(tmp_path, "[limits]\nhttp_requests_per_s = 0.1\nhttp_burst = 2\n")
    alice, bob = token(config, "alice"), token(config, "bob")
    monkeypatch.setenv(VARIABLE, SECRET)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        assert gateway.http_url is not None
        answers = [
            await http.post(gateway.http_url, json=ping, headers=dict(bearer(alice))) for _ in range(3)
        ]
        assert all(answer.status_code != 429 for answer in answers[:2])  # the burst, at the bound
        assert answers[2].status_code == 429 and answers[2].headers["retry-after"] == "10"
        other = await http.post(gateway.http_url, json=ping, headers=dict(bearer(bob)))
        assert other.status_code != 429  # bob's own bucket


async def test_a_retry_round_is_judged_by_the_rules_in_force_and_a_refused_one_ends_its_parked_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2026-07-28 client's call to a legacy backend that elicits: the client is answered input_required
    and retries. Between the rounds a reload denies the tool: the retry is refused, the parked call ends."""
    rules = '[policy]\n[[policy.rules]]\neffect = "deny"\nwhen = \'mcp.tool.name == "nothing"\'\n'
    config = gateway_config(tmp_path, rules)
    config.write_text(config.read_text().replace(TOOLS, "--only=ask_name,echo"))
    alice = token(config, "alice")
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None

        async def elicit(context: Any, params: Any) -> ElicitResult:
            config.write_text(config.read_text().replace('"nothing"', '"ask_name"'))
            assert (await gateway.reload("a test")).ok
            return ElicitResult(action="accept", content={"name": "Ada"})

        async with websocket_client(
            gateway.websocket_url, bearer(alice), mode="2026-07-28", elicitation_callback=elicit
        ) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("ask_name", {})
            assert (
                refused.value.error.code == -32602 and "Unknown tool: ask_name" in refused.value.error.message
            )
            assert gateway.bridges.calls == {}  # the parked call ended with the refusal, not at its expiry
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


async def test_the_stdio_session_is_judged_as_the_stdio_listener(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS, "--prompts", "--resources")])
    config.write_text(
        config.read_text()
        + "[policy]\n[[policy.rules]]\neffect = 'deny'\n"
        + 'when = \'source.listener == "stdio" && (mcp.tool.name == "crash" || mcp.prompt.name == "greet"'
        + ' || mcp.resource.uri == "test://shared")\'\n'
    )
    async with sdk_client(config, tmp_path / "gateway.log") as client:
        assert sorted(await tool_names(client)) == ["add", "echo", "pid", "touch"]
        with pytest.raises(MCPError) as completion:
            await client.complete(
                PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "A"}
            )
        assert completion.value.error.code == -32602
        with pytest.raises(MCPError) as subscribe:
            await client.subscribe_resource("test://shared")
        assert "Resource not found" in subscribe.value.error.message
        answer = await client.complete(
            PromptReference(type="ref/prompt", name="summarize"), {"name": "text", "value": "A"}
        )
        assert answer.completion.values  # an allowed ref still completes


async def test_each_round_a_legacy_client_lives_with_a_modern_backend_is_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: Path
) -> None:
    """A legacy client, a 2026-07-28 backend that asks for input: the gateway lives the rounds out with
    real requests to the client (the shim). A reload between the rounds denies the tool: the next round
    is not sent, and the call is refused as the first round would have been."""
    argv = modern_server_argv(node)
    backend = {"name": "ts", "command": argv[0], "args": argv[1:]}
    config = with_websocket(write_config(tmp_path / "g.toml", [backend]), auth=AUTH)
    config.write_text(config.read_text() + "[policy]\n[[policy.rules]]\neffect = 'deny'\nwhen = 'false'\n")
    alice = token(config, "alice")
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None

        async def elicit(context: Any, params: Any) -> ElicitResult:
            config.write_text(
                config.read_text().replace("when = 'false'", "when = 'mcp.tool.name == \"ask_name\"'")
            )
            assert (await gateway.reload("a test")).ok
            return ElicitResult(action="accept", content={"name": "Ada"})

        async with websocket_client(
            gateway.websocket_url, bearer(alice), elicitation_callback=elicit
        ) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("ask_name", {})
            assert (
                refused.value.error.code == -32602 and "Unknown tool: ask_name" in refused.value.error.message
            )
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"


async def test_a_slot_in_flight_is_freed_when_its_call_is_cancelled_or_its_session_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_config(tmp_path, "[limits]\nmax_inflight = 1\n")
    config.write_text(config.read_text().replace(TOOLS, "--only=echo,sleep"))
    alice = token(config, "alice")
    monkeypatch.setenv(VARIABLE, SECRET)
    key = client_key(None, "alice", "")  # whom [limits] count: the principal, on every listener
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.limiter.caps is not None
        caps = gateway.limiter.caps

        async def until_in_flight(count: int) -> None:
            with trio.fail_after(10):
                while caps.in_flight(key) != count:  # noqa: ASYNC110 (the count signals nothing: no event)
                    await trio.sleep(0.01)

        async def hold_a_call(cancel: trio.CancelScope) -> None:
            async with websocket_client(gateway.websocket_url, bearer(alice)) as client:
                with cancel:
                    await client.call_tool("sleep", {"seconds": 60})
                await trio.sleep_forever()  # the session stays open after a cancelled call

        for ending in ("cancel", "session end"):
            async with trio.open_nursery() as nursery:
                cancel = trio.CancelScope()
                nursery.start_soon(hold_a_call, cancel)
                await until_in_flight(1)
                async with websocket_client(gateway.websocket_url, bearer(alice)) as other:
                    refused = await other.call_tool("echo", {"text": "a second one"})
                    assert refused.is_error and "1 calls already in flight" in text_of(refused)
                if ending == "cancel":
                    cancel.cancel()  # the SDK sends notifications/cancelled; the session goes on
                    await until_in_flight(0)
                nursery.cancel_scope.cancel()  # the session ends (with its call in flight, the 2nd time)
            await until_in_flight(0)
            assert len(caps) == 0  # an idle caller leaves the table


async def test_a_listen_is_granted_only_the_resources_the_policy_lets_its_caller_see(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--resources")])
    config.write_text(config.read_text() + "[policy]\n[[policy.rules]]\neffect = 'deny'\n")
    config.write_text(config.read_text() + "when = 'mcp.resource.uri == \"test://shared\"'\n")
    meta = {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {},
        CLIENT_INFO_KEY: {"name": "r", "version": "1"},
    }
    wanted = {"resourceSubscriptions": ["test://shared", "test://alpha/readme"]}
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        await gateway.request("L", "subscriptions/listen", {"notifications": wanted, "_meta": meta})
        ack = await gateway.receive()
        assert ack.get("method") == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"]["resourceSubscriptions"] == ["test://alpha/readme"]


async def test_a_reload_that_changes_what_a_caller_sees_is_news_to_its_listen(tmp_path: Path) -> None:
    """A listen follows the same news as list_changed: a reload that changes only the rules, and with them
    the tools this caller sees, is announced to the listen."""
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)])
    config.write_text(config.read_text() + "[policy]\n[[policy.rules]]\neffect = 'deny'\nwhen = 'false'\n")
    meta = {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {},
        CLIENT_INFO_KEY: {"name": "r", "version": "1"},
    }
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        await gateway.request(
            "L", "subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": meta}
        )
        ack = await gateway.receive()
        assert ack.get("method") == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"].get("toolsListChanged") is True, ack
        config.write_text(config.read_text().replace("when = 'false'", "when = 'mcp.tool.name == \"echo\"'"))
        gateway.process.send_signal(signal.SIGHUP)
        told = await gateway.receive()
        assert told.get("method") == "notifications/tools/list_changed", told
