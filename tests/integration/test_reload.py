"""Reloading a running gateway's config: with sessions open and calls in flight, the difference applied as
supervisor operations, the rest untouched; a bad file refused whole; SIGHUP, `mcp-gateway reload` and
`watch_config` as ways in."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from support import (
    DEADLINE_S,
    RawClient,
    backend_entry,
    connect,
    gateway_argv,
    read_log,
    running,
    with_websocket,
    write_config,
)
from trio_websocket import ConnectionRejected

from actors.runtime.control import ControlFiles, config_key
from actors.runtime.control_peers import read_outcome


def entries(*extra: dict[str, Any], changed: bool = False) -> list[dict[str, Any]]:
    keep = backend_entry("keep", "--only=pid,echo")
    gone = backend_entry("gone", "--only=sleep,pid")
    change = backend_entry("change", "--only=pid", *(["--instructions=new"] if changed else []))
    return [keep, *([] if changed else [gone]), change, *extra]


async def call_pid(client: Any, request_id: int, tool: str) -> int:
    await client.call(request_id, tool)
    return int((await client.answer_to(request_id))["result"]["structuredContent"]["pid"])


async def test_a_reload_starts_stops_and_restarts_what_changed_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    with_websocket(write_config(path, entries()))
    async with running(path) as gateway, connect(gateway.websocket_url or "") as client:
        keep_pid, change_pid = (
            await call_pid(client, 1, "pid"),
            await call_pid(client, 2, "change__pid"),
        )
        await client.call(3, "sleep", seconds=60)  # in flight on the backend the reload removes
        await client.call(4, "echo", text="before")
        assert "result" in await client.answer_to(4)

        with_websocket(write_config(path, entries(backend_entry("new", "--only=add"), changed=True)))
        outcome = await gateway.reload("a test")
        assert outcome.ok, outcome
        assert outcome.lines[0] == "added new; removed gone; restarted change; 1 backend untouched"

        cut = await client.answer_to(3)
        assert cut["error"]["data"]["backend"] == "gone"  # answered, naming the backend that left
        assert await call_pid(client, 5, "pid") == keep_pid  # untouched, same process
        names = await wait_until_listed(client, lambda names: {"add", "change__pid"} <= set(names))
        assert not any(name.startswith("gone__") or name == "sleep" for name in names)
        assert await call_pid(client, 6, "change__pid") != change_pid  # restarted with its new args
        await client.call(7, "add", a=2, b=3)
        assert (await client.answer_to(7))["result"]["structuredContent"] == {"sum": 5}


async def test_a_bad_file_is_refused_whole_and_the_running_config_stays(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    with_websocket(write_config(path, entries()))
    async with running(path) as gateway, connect(gateway.websocket_url or "") as client:
        before = gateway.config
        with_websocket(write_config(path, [*entries(), {"name": 5}], request_timeout_s="soon"))
        outcome = await gateway.reload("a test")
        assert not outcome.ok
        assert any("request_timeout_s" in line and str(path) in line for line in outcome.lines), outcome
        assert len(outcome.lines) >= 2  # every problem, not the first
        assert gateway.config is before
        await client.call(1, "echo", text="still here")
        assert (await client.answer_to(1))["result"]["structuredContent"] == {"text": "still here"}


async def test_the_reload_command_and_sighup_reach_the_gateway_serving_a_file(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    write_config(path, [backend_entry("keep", "--only=echo")])
    environment = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    log_file = tmp_path / "gateway.log"
    process = await trio.lowlevel.open_process(
        gateway_argv(path, log_file), stdin=-1, stdout=-1, env=environment
    )
    client = RawClient(process)
    control = ControlFiles(tmp_path, config_key(path), process.pid)
    try:
        await client.initialize()  # answered: the gateway runs, its pid file written before
        assert control.pid_path.is_file()
        write_config(path, [backend_entry("keep", "--only=echo"), backend_entry("more", "--only=add")])
        reload = [sys.executable, "-m", "actors", "reload", "--config", str(path)]
        done = await trio.run_process(reload, env=environment, capture_stdout=True, capture_stderr=True)
        assert done.stdout.decode().splitlines() == ["added more; 1 backend untouched"]

        write_config(path, [backend_entry("keep", "--only=echo")])
        await client.receive_until(
            lambda message: message.get("method") == "notifications/tools/list_changed"
        )
        os.kill(process.pid, signal.SIGHUP)
        await wait_until_listed(client, lambda names: "add" not in names)
        outcome = read_outcome(control)
        assert outcome is not None and outcome.lines == ("removed more; 1 backend untouched",)

        path.write_text("not toml [")
        refused = await trio.run_process(reload, env=environment, capture_stderr=True, check=False)
        assert refused.returncode == 2 and b"not reloaded" in refused.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(DEADLINE_S):
            await process.wait()
    assert process.returncode == 0
    assert not control.pid_path.exists() and not control.outcome_path.exists()  # gone with the gateway
    log = read_log(log_file)
    assert "SIGHUP: reloading" in log and "reloaded" in log


async def wait_until_listed(client: Any, done: Any) -> list[str]:
    """tools/list after each list_changed until `done(names)`."""
    with trio.fail_after(DEADLINE_S):
        for request_id in range(100, 200):
            await client.request(request_id, "tools/list")
            answer = await client.answer_to(request_id)
            names = [tool["name"] for tool in answer["result"]["tools"]]
            if done(names):
                return names
            await client.receive_until(
                lambda message: message.get("method") == "notifications/tools/list_changed"
            )
    raise AssertionError("the list never changed as expected")


async def test_watch_config_reloads_a_file_that_changed(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    with_websocket(write_config(path, [backend_entry("keep", "--only=echo")], watch_config=True))
    async with running(path) as gateway, connect(gateway.websocket_url or "") as client:
        more = [backend_entry("keep", "--only=echo"), backend_entry("more", "--only=add")]
        with_websocket(write_config(path, more, watch_config=True))
        assert "add" in await wait_until_listed(client, lambda names: "add" in names)


async def test_listener_and_auth_changes_apply_to_new_connections_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELOAD_SECRET", "a-secret-for-the-reload-test-of-32-bytes")
    path = tmp_path / "g.toml"
    with_websocket(write_config(path, [backend_entry("keep", "--only=echo")]))
    async with running(path) as gateway, connect(gateway.websocket_url or "") as open_before:
        auth = {"jwt_secret_env": "RELOAD_SECRET"}
        with_websocket(write_config(path, [backend_entry("keep", "--only=echo")]), auth=auth)
        outcome = await gateway.reload("a test")
        # (keep restarts too: the new token secret is one more variable withheld from backends)
        assert outcome.lines == ("restarted keep; new settings for [websocket]; 0 backends untouched",)
        with pytest.raises(ConnectionRejected) as refused:
            async with connect(gateway.websocket_url or "", initialize=False):
                pass
        assert refused.value.status_code == 401  # a new connection needs a token now
        await wait_until_listed(open_before, lambda names: "echo" in names)  # keep is back
        await open_before.call(1, "echo", text="still in")  # the session open before goes on
        assert (await open_before.answer_to(1))["result"]["structuredContent"] == {"text": "still in"}


async def test_a_reload_applies_new_byte_budgets_to_new_requests(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    write_config(path, entries())
    async with running(path) as gateway:
        assert gateway.bridges.budget.max_client_bytes == 16 * 1024 * 1024
        write_config(path, entries(), max_request_bytes=2048, max_client_bytes=4096)
        outcome = await gateway.reload("a test")
        assert outcome.ok, outcome
        budget = gateway.bridges.budget
        assert (budget.max_request_bytes, budget.max_client_bytes) == (2048, 4096)
