"""Secrets by reference with real parts: a stdio backend gets its secrets through its environment and never
its command line; a reload reads every reference again, restarts the backend whose secret changed with the
new value and leaves the client's session and the other backends as they were; [gateway] block_secrets =
"warn" lets a call through and says so in the log and the audit, naming the secret and never its value."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import (
    DEADLINE_S,
    Notifications,
    backend_entry,
    captured_logs,
    listed_again,
    running,
    with_http,
    write_config,
)

ENV_VALUE = "env-secret-c81e728d9d4c"
FILE_VALUE = "file-secret-a87ff679a2f3"
LITERAL = "literal-secret-e4da3b7fbbce"


def secrets_config(tmp_path: Path, **gateway: Any) -> Path:
    (tmp_path / "key").write_text(FILE_VALUE + "\n")
    env = {
        "FROM_ENV": {"env": "GW_SECRET_TEST"},
        "FROM_FILE": {"file": "key"},
        "LITERAL": {"value": LITERAL},
        "PLAIN": "not-a-secret",
    }
    keyed = backend_entry("keyed", "--only=environment,pid,echo", env=env)
    other = backend_entry("other", "--only=pid")
    return with_http(write_config(tmp_path / "gateway.toml", [keyed, other], **gateway))


async def structured(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, result
    return result.structured_content


async def test_a_stdio_backend_gets_its_secrets_in_its_environment_and_never_its_command_line(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("GW_SECRET_TEST", ENV_VALUE)
    async with running(secrets_config(tmp_path)) as gateway:
        assert gateway.http_url is not None
        with trio.fail_after(DEADLINE_S):
            async with Client(streamable_http_client(gateway.http_url), mode="legacy") as client:
                env = (await structured(client, "environment"))["env"]
                pid = (await structured(client, "pid"))["pid"]
                cmdline = await trio.Path(f"/proc/{pid}/cmdline").read_bytes()  # any local user reads it
    assert {name: env.get(name) for name in ("FROM_ENV", "FROM_FILE", "LITERAL", "PLAIN")} == {
        "FROM_ENV": ENV_VALUE,
        "FROM_FILE": FILE_VALUE,
        "LITERAL": LITERAL,
        "PLAIN": "not-a-secret",
    }
    assert "GW_SECRET_TEST" not in env  # the gateway's variable itself is not passed on
    assert b"testbackend.py" in cmdline
    assert not any(value.encode() in cmdline for value in (ENV_VALUE, FILE_VALUE, LITERAL))


async def test_a_reload_reads_a_changed_secret_and_restarts_only_its_backend(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("GW_SECRET_TEST", ENV_VALUE)
    path = secrets_config(tmp_path)
    notifications = Notifications()
    async with running(path) as gateway:
        assert gateway.http_url is not None
        client_cm = Client(
            streamable_http_client(gateway.http_url), mode="legacy", message_handler=notifications.handle
        )
        with trio.fail_after(DEADLINE_S):
            async with client_cm as client:
                before = (await structured(client, "environment"))["env"]["FROM_FILE"]
                keyed, other = (
                    (await structured(client, "pid"))["pid"],
                    (await structured(client, "other__pid"))["pid"],
                )
                (tmp_path / "key").write_text("file-secret-rotated-0001\n")
                seen = notifications.count("notifications/tools/list_changed")
                outcome = await gateway.reload("a test")
                assert outcome.ok and outcome.lines[0] == "restarted keyed; 1 backend untouched", outcome
                await listed_again(client, notifications, seen, "environment")
                after = (await structured(client, "environment"))["env"]["FROM_FILE"]
                assert (await structured(client, "pid"))["pid"] != keyed  # started again, with the new value
                assert (await structured(client, "other__pid"))["pid"] == other  # untouched
                assert (await structured(client, "echo", {"text": "same session"}))["text"] == "same session"
    assert (before, after) == (FILE_VALUE, "file-secret-rotated-0001")


async def test_warn_lets_a_call_through_and_names_the_secret_in_the_log_and_the_audit(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("GW_SECRET_TEST", ENV_VALUE)
    path = secrets_config(tmp_path, block_secrets="warn")
    path.write_text(path.read_text() + '\n[audit]\npath = "audit.sqlite3"\ninclude_arguments = true\n')
    with captured_logs() as logs:
        async with running(path) as gateway:
            assert gateway.http_url is not None
            with trio.fail_after(DEADLINE_S):
                async with Client(streamable_http_client(gateway.http_url), mode="legacy") as client:
                    echoed = await structured(client, "echo", {"text": f"mine: {ENV_VALUE}"})
    assert echoed["text"] == f"mine: {ENV_VALUE}"  # let through: the client sent it, and gets it back
    assert not any(ENV_VALUE in line for line in logs)
    assert any("its arguments hold the secret env:GW_SECRET_TEST; let through" in line for line in logs)
    with sqlite3.connect(tmp_path / "audit.sqlite3") as db:
        (row,) = db.execute("SELECT arguments, decision, rule FROM calls WHERE tool = 'echo'").fetchall()
    assert row == (
        '{"text":"mine: [REDACTED:env:GW_SECRET_TEST]"}',
        None,
        "block_secrets: arguments hold env:GW_SECRET_TEST; block_secrets: result holds env:GW_SECRET_TEST",
    )
