"""Middleware and the audit log through a real gateway (in this process) with official SDK clients over
real WebSockets in front of real backend processes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
from example_middleware import REFUSED, BrokenRun
from mcp import MCPError
from sdk_websocket import websocket_client
from support import (
    backend_entry,
    captured_logs,
    running,
    toml_value,
    tool_names,
    with_websocket,
    write_config,
)

from actors.cli import main
from actors.config import AuditSettings, ConfigError, load_config
from actors.middleware import ClientInfo
from actors.middleware.audit import AuditStore
from actors.middleware.examples import ReadOnlyForGuests
from actors.middleware.loading import build_middleware

TOOLS = "--only=echo,add,fail,sleep"


def append(config: Path, text: str) -> Path:
    config.write_text(config.read_text() + "\n" + text + "\n")
    return config


def middleware_table(use: str, **options: Any) -> str:
    table = f'[[middleware]]\nuse = "{use}"\n'
    if options:
        table += "options = { " + ", ".join(f"{k} = {toml_value(v)}" for k, v in options.items()) + " }\n"
    return table


def audit_rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM calls ORDER BY id")]


async def test_middleware_filters_refuses_and_rewrites(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]))
    append(
        config, middleware_table("example_middleware.Policy", hidden=["add"], refused=["fail"], prefix="> ")
    )
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            assert sorted(await tool_names(client)) == ["echo", "fail", "sleep"]  # add is filtered out
            result = await client.call_tool("echo", {"text": "hi"})
            assert result.content[0].text == "> HI"  # type: ignore[union-attr]  # in: prefixed; out: shouted
            with pytest.raises(MCPError) as refused:
                await client.call_tool("fail", {"message": "x"})
            assert refused.value.error.code == REFUSED
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("add", {"a": 1, "b": 2})
            assert hidden.value.error.code == -32602  # hidden tools are as unknown as any other name
    # A bug in middleware is the error of the call it met, and nothing else's. (module:Name works too.)
    config = with_websocket(write_config(tmp_path / "h.toml", [backend_entry("alpha", TOOLS)]))
    append(config, middleware_table("example_middleware:BrokenBeforeCall"))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            with pytest.raises(MCPError) as broken:
                await client.call_tool("add", {"a": 1, "b": 2})
            assert broken.value.error.code == -32603
            assert "BrokenBeforeCall failed in before_call" in broken.value.error.message
            assert (await client.call_tool("echo", {"text": "still fine"})).content[0].text == "still fine"  # type: ignore[union-attr]


async def test_the_audit_log_has_one_record_per_call_and_no_argument_values(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]),
        auth={"jwt_secret_env": "AUDIT_TEST_SECRET"},
    )
    append(config, '[audit]\npath = "logs/audit.sqlite3"\n')
    append(config, middleware_table("example_middleware.Policy", refused=["add"]))
    secret = "audit-test-secret-that-is-long-enough"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDIT_TEST_SECRET", secret)
        import jwt

        token = jwt.encode({"sub": "alice"}, secret)
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            headers = [("authorization", f"Bearer {token}")]
            async with websocket_client(gateway.websocket_url, headers=headers) as client:
                await client.call_tool("echo", {"text": "secret value"})
                await client.call_tool("fail", {"message": "bad"})
                for tool, arguments in [("add", {"a": 1, "b": 2}), ("nothing", {})]:
                    with pytest.raises(MCPError):
                        await client.call_tool(tool, arguments)
                with trio.move_on_after(0.5):
                    await client.call_tool("sleep", {"seconds": 60})  # cancelled by the client
    rows = audit_rows(tmp_path / "logs" / "audit.sqlite3")
    assert [(r["tool"], r["backend"], r["outcome"], r["error_code"]) for r in rows] == [
        ("echo", "alpha", "ok", None),
        ("fail", "alpha", "tool_error", None),
        ("add", "alpha", "rejected", REFUSED),
        ("nothing", None, "error", -32602),
        ("sleep", "alpha", "cancelled", None),
    ]
    assert {r["subject"] for r in rows} == {"alice"}
    assert all(r["arguments"] is None for r in rows)  # sizes only, unless include_arguments
    assert rows[0]["argument_bytes"] == len('{"text":"secret value"}')
    assert rows[0]["result_bytes"] > 0 and rows[0]["duration_ms"] > 0
    assert rows[4]["duration_ms"] >= 400  # the wait until the client's cancel (0.5 s after it sent the call)


async def test_the_audit_log_keeps_argument_values_when_told(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]))
    append(config, '[audit]\npath = "audit.sqlite3"\ninclude_arguments = true\n')
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            await client.call_tool("add", {"a": 1, "b": 2})
    (row,) = audit_rows(tmp_path / "audit.sqlite3")
    assert row["arguments"] == '{"a":1,"b":2}' and row["subject"] is None and row["client"] == "mcp"


def test_the_audit_file_rotates_by_size_and_keeps_its_backups(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    store = AuditStore(AuditSettings(path=path, max_bytes=16 * 1024, backups=2, max_age_s=0))
    store.open()
    when, arguments = "2026-11-23T00:00:00+00:00", "x" * 500
    names = (when, "s", None, None, "b", "t", "t")
    record = (*names, 1.0, "ok", None, 10, 10, arguments, None, "c", 1, "allow", "r", None, None)
    for _ in range(40):
        store.write([record] * 10)
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "audit.sqlite3",
        "audit.sqlite3.1",
        "audit.sqlite3.2",
    ]
    for name in ("audit.sqlite3.1", "audit.sqlite3.2"):
        assert len(audit_rows(tmp_path / name)) > 0  # whole databases, readable after rotation
    assert path.stat().st_size <= 16 * 1024 + 8 * 1024


def test_middleware_and_audit_config_problems_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha")])
    append(config, middleware_table("no_such_module.Thing"))
    append(config, middleware_table("example_middleware.Nothing"))
    append(config, middleware_table("nodots"))
    append(config, '[[middleware]]\nuse = "example_middleware.Policy"\noptions = 3\n')
    append(config, '[audit]\nmax_bytes = 10\ninclude_arguments = "yes"\n')
    assert main(["check", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: middleware[0].use: cannot import 'no_such_module': ModuleNotFoundError" in err
    assert f"{config}: middleware[1].use: module 'example_middleware' has no 'Nothing'" in err
    assert f"{config}: middleware[2].use: 'nodots' is not a dotted path like 'package.module.Name'" in err
    assert f"{config}: middleware[3].options: expected a table, got an integer" in err
    assert f"{config}: audit.include_arguments: expected true or false, got a string" in err
    assert f"{config}: audit.max_bytes: must be 4096 or more" in err

    for use, reason in [
        ("example_middleware.failing_factory", "failed: ValueError: missing licence key"),
        ("example_middleware.not_a_middleware", "made a dict, not an actors.middleware.Middleware"),
    ]:
        made = write_config(tmp_path / "m.toml", [backend_entry("alpha")])
        append(made, middleware_table(use))
        with pytest.raises(ConfigError) as failed:
            build_middleware(load_config(made))
        assert str(failed.value) == f"{made.resolve()}: middleware[0].use: {use} {reason}"


def test_read_only_for_guests_shows_guests_only_read_only_tools() -> None:
    tools = [
        {"name": "look", "annotations": {"readOnlyHint": True}},
        {"name": "change", "annotations": {"readOnlyHint": False}},
        {"name": "unsure"},
    ]
    guests = ReadOnlyForGuests(writers=["alice"])
    assert guests.filter_tools(ClientInfo("ws-1", "alice"), tools) == tools
    for client in (ClientInfo("ws-2", "bob"), ClientInfo("stdio")):
        assert [tool["name"] for tool in guests.filter_tools(client, tools)] == ["look"]


async def test_a_backend_error_code_no_column_holds_is_audited_and_the_gateway_goes_on(
    tmp_path: Path,
) -> None:
    # The codec accepts any 64-bit integer as a code; SQLite's INTEGER holds only the signed ones: 2**63 once
    # raised OverflowError in the writer, which ended the whole gateway.
    backends = [backend_entry("alpha", "--only=echo,rpc_error")]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    append(config, '[audit]\npath = "audit.sqlite3"\n')
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            for code in (2**63, 2**64 - 1, -(2**63)):
                with pytest.raises(MCPError) as answered:
                    await client.call_tool("rpc_error", {"code": code, "message": "odd"})
                assert answered.value.error.code == code  # passed on as the backend sent it
            await client.call_tool("echo", {"text": "after"})  # the writer has written the batch by now
            await client.call_tool("echo", {"text": "still serving"})
    rows = audit_rows(tmp_path / "audit.sqlite3")
    assert [(r["tool"], r["outcome"], r["error_code"], r["cut"]) for r in rows] == [
        ("rpc_error", "error", None, "error_code"),
        ("rpc_error", "error", None, "error_code"),
        ("rpc_error", "error", -(2**63), None),
        ("echo", "ok", None, None),
        ("echo", "ok", None, None),
    ]


async def test_a_middleware_whose_background_work_fails_is_restarted_and_the_gateway_goes_on(
    tmp_path: Path,
) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", TOOLS)]))
    append(config, middleware_table("example_middleware:BrokenRun"))
    with captured_logs("INFO") as lines:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            (broken,) = gateway.middleware
            assert isinstance(broken, BrokenRun)
            async with websocket_client(gateway.websocket_url) as client:
                assert (await client.call_tool("echo", {"text": "x"})).content[0].text == "x"  # type: ignore[union-attr]
                with trio.fail_after(10):
                    await broken.restarted.wait()
                assert (await client.call_tool("echo", {"text": "y"})).content[0].text == "y"  # type: ignore[union-attr]
    assert any("bug in the operator's background work; restarting in" in line for line in lines)


def test_an_audit_log_that_cannot_be_opened_fails_the_start_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha")]))
    append(config, '[audit]\npath = "a-file/audit.sqlite3"\n')
    assert main(["serve", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert f"mcp-gateway: cannot open the audit log {tmp_path / 'a-file' / 'audit.sqlite3'}: " in err
    assert "Traceback" not in err
