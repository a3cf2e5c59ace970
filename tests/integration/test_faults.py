"""The faults real MCP servers commit, each against a real misbehaving backend process, through the SDK client
or raw pipes: the caller always gets an answer, the bad backend alone is restarted, the session goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import MCPError
from support import (
    Notifications,
    backend_entry,
    fast_restarts,
    raw_gateway,
    read_log,
    sdk_client,
    started_pids,
    tool_names,
    write_config,
)


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "gateway.log"


async def test_a_call_past_its_timeout_is_answered_and_cancelled_at_the_backend(
    tmp_path: Path, log_file: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=sleep,echo,cancelled_requests", request_timeout_s=0.5),
            backend_entry("beta", "--only=sleep"),  # the gateway default (60 s) applies to beta
        ],
    )
    async with sdk_client(config, log_file) as client:
        with pytest.raises(MCPError) as timed_out:
            await client.call_tool("sleep", {"seconds": 600})
        assert timed_out.value.error.code == -32001
        assert "alpha" in timed_out.value.error.message and "0.5s" in timed_out.value.error.message
        # The cancellation went out before anything else this session sends to alpha, so it has arrived:
        cancelled = (await client.call_tool("cancelled_requests", {})).structured_content
        assert cancelled is not None and len(cancelled["cancelled"]) == 1
        assert isinstance(
            cancelled["cancelled"][0], int
        )  # the gateway's own id for the call, not the client's
        assert (await client.call_tool("echo", {"text": "fine"})).structured_content == {"text": "fine"}


async def test_a_backend_that_stops_answering_pings_is_restarted(tmp_path: Path, log_file: Path) -> None:
    state = tmp_path / "alpha.state"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry(
                "alpha",
                "--only=freeze,pid",
                f"--state-file={state}",
                restart=fast_restarts(),
                health={"interval_s": 0.2, "timeout_s": 0.3, "failures": 2},
            ),
            backend_entry("beta", "--only=add"),
        ],
        shutdown_s=1,
    )
    notifications = Notifications()
    async with sdk_client(config, log_file, notifications) as client:
        with pytest.raises(MCPError) as hung:
            await client.call_tool("freeze", {})  # blocks alpha's whole process: no answer, no pings
        assert hung.value.error.code == -32000
        assert "alpha" in hung.value.error.message and "health pings" in hung.value.error.message
        await notifications.wait_for("notifications/tools/list_changed", 2)  # down, then back
        assert sorted(await tool_names(client)) == ["add", "freeze", "pid"]
        _, second = started_pids(state)
        assert (await client.call_tool("pid", {})).structured_content == {"pid": second}
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}
    assert "[backend=alpha] no answer to a health ping" in read_log(log_file)


async def test_garbage_from_a_backend_is_dropped_and_it_keeps_serving(tmp_path: Path, log_file: Path) -> None:
    state = tmp_path / "alpha.state"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=garbage,echo", f"--state-file={state}"),
            backend_entry(
                "babbler", "--garbage-only", startup_timeout_s=0.5, restart={"policy": "temporary"}
            ),
        ],
    )
    async with sdk_client(config, log_file) as client:
        assert sorted(await tool_names(client)) == ["echo", "garbage"]  # babbler never became a backend
        sent = await client.call_tool("garbage", {})
        assert sent.structured_content == {"lines": 9}
        assert (await client.call_tool("echo", {"text": "clean"})).structured_content == {"text": "clean"}
        assert len(started_pids(state)) == 1  # garbage is no reason to restart
    log = read_log(log_file)
    assert "[backend=alpha] dropped a frame that is not JSON-RPC" in log
    assert "[backend=alpha] dropped a response to unknown or cancelled request id 987654321" in log
    assert "[backend=babbler]" in log and "did not finish within 0.5s" in log


async def test_floods_and_oversized_messages(tmp_path: Path, log_file: Path) -> None:
    state = tmp_path / "alpha.state"
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", "--only=stderr_flood,big_response,echo", f"--state-file={state}")],
        max_message_bytes=65536,
    )
    async with raw_gateway(config, log_file) as gateway:
        await gateway.initialize()
        await gateway.request(1, "tools/call", {"name": "stderr_flood", "arguments": {"bytes": 4_000_000}})
        assert "error" not in await gateway.answer_to(1)  # megabytes of stderr never block the backend

        await gateway.request(2, "tools/call", {"name": "big_response", "arguments": {"bytes": 200_000}})
        too_big = await gateway.answer_to(2)
        assert too_big["error"]["code"] == -32603
        assert "alpha" in too_big["error"]["message"] and "max_message_bytes" in too_big["error"]["message"]

        await gateway.request(3, "tools/call", {"name": "echo", "arguments": {"text": "x" * 100_000}})
        refused = await gateway.answer_to(3)  # the client's own oversized request, answered by its id
        assert refused["error"]["code"] == -32600 and "max_message_bytes" in refused["error"]["message"]

        await gateway.request(4, "tools/call", {"name": "echo", "arguments": {"text": "small"}})
        assert (await gateway.answer_to(4))["result"]["structuredContent"] == {"text": "small"}
        assert len(started_pids(state)) == 1
    log = read_log(log_file)
    assert "[backend=alpha] stderr:" in log and "stderr lines not logged" in log


async def test_a_client_cancellation_reaches_the_backend_and_gets_no_response(tmp_path: Path) -> None:
    backends = [backend_entry("alpha", "--only=progress,cancelled_requests")]
    config = write_config(tmp_path / "gateway.toml", backends)
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        await gateway.initialize()
        params = {
            "name": "progress",
            "arguments": {"steps": 10_000, "delay": 0.05},
            "_meta": {"progressToken": "p"},
        }
        await gateway.request("slow", "tools/call", params)
        progress = await gateway.receive()  # the backend is working on it
        assert progress["method"] == "notifications/progress" and progress["params"]["progressToken"] == "p"
        await gateway.notify("notifications/cancelled", {"requestId": "slow", "reason": "changed my mind"})
        await gateway.request("which", "tools/call", {"name": "cancelled_requests", "arguments": {}})
        answer = (await gateway.receive_until(lambda message: "id" in message))[-1]
        assert answer["id"] == "which"  # nothing for "slow" came first, or ever
        (backend_id,) = answer["result"]["structuredContent"]["cancelled"]
        assert isinstance(backend_id, int)
        await gateway.request("last", "ping")
        assert (await gateway.receive_until(lambda message: "id" in message))[-1]["id"] == "last"
