"""A stdio client that quits leaves no backend behind (issue #24). The official Python SDK 2.x client's own
close sequence (stdin closed, 2 s, SIGTERM to the gateway's group, 2 s, SIGKILL) against a gateway whose
backends each started a grandchild, some of both deaf to stdin's end and to SIGTERM: every one of them is
gone within 1.5 s of the end of stdin, before the SDK would send its SIGTERM. A signal in the middle of the
shutdown hurries it and still leaves nothing; calls in flight are answered before the gateway exits."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio
from mcp import Client
from process_tree import BOUND_S, GRANDCHILDREN, Gone, child_running, descendants_of, end_all, family_config
from support import RawClient, gateway_argv, kill_quietly, read_log, sdk_client, search_stream

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")

IN_FLIGHT = 8


async def start_grandchildren(client: Client) -> list[int]:
    pids = []
    for tool, arguments in GRANDCHILDREN:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        pids.append(result.structured_content["pid"])  # type: ignore[index]
    return pids


async def test_the_python_sdk_closing_leaves_no_backend_nor_grandchild_within_the_bound(
    tmp_path: Path,
) -> None:
    config, log = family_config(tmp_path), tmp_path / "gateway.log"
    gone = Gone([])
    try:
        async with trio.open_nursery() as nursery, sdk_client(config, log) as client:
            grandchildren = await start_grandchildren(client)
            gone = Gone(descendants_of(child_running(config)))  # from now: the SDK closes stdin next
            assert {p.pid for p in gone.procs} >= set(grandchildren) and len(gone.procs) >= 6
            gone.start(nursery)
        assert gone.after_s is not None and gone.after_s <= BOUND_S
    finally:
        kill_quietly(p.pid for p in gone.procs)
    text = read_log(log)
    assert "stdio client is gone; stopping" in text and "gateway stopped" in text
    assert "during the shutdown" not in text  # done before the SDK's SIGTERM: nothing to hurry


async def test_a_sigterm_in_the_middle_of_the_shutdown_hurries_it_and_leaves_nothing(tmp_path: Path) -> None:
    """shutdown_s = 40: stdin's end gives the backends 3 s to leave politely, the SIGTERM waits 2 s; the
    deaf backends would take both. A SIGTERM then another cut them short."""
    config = family_config(tmp_path, shutdown_s=40)
    argv = gateway_argv(config, tmp_path / "gateway.log")
    process = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, stderr=-1)
    assert process.stderr is not None
    gone = Gone([])
    try:
        gateway = RawClient(process)
        await gateway.initialize()
        for n, (tool, arguments) in enumerate(GRANDCHILDREN):
            await gateway.call(n, tool, **arguments)
            assert "result" in await gateway.answer_to(n)
        procs = descendants_of(process.pid)
        await gateway.close_stdin()
        await search_stream(process.stderr, re.compile(rb"(stdio client is gone; stopping)"), "the shutdown")
        async with trio.open_nursery() as nursery:
            gone = Gone(procs)
            gone.start(nursery)
            process.send_signal(signal.SIGTERM)
            await search_stream(process.stderr, re.compile(rb"(get SIGTERM now)"), "the hurry")
            process.send_signal(signal.SIGTERM)
            await search_stream(process.stderr, re.compile(rb"(get SIGKILL now)"), "the force")
        assert gone.after_s is not None and gone.after_s < 2.0  # less than the polite wait alone
        assert await gateway.wait_exit() == 0  # it stopped, not killed by the signals
    finally:
        await end_all(process, gone)


async def test_calls_in_flight_when_stdin_ends_are_answered_before_the_gateway_exits(tmp_path: Path) -> None:
    config = family_config(tmp_path)
    process = await trio.lowlevel.open_process(
        gateway_argv(config, tmp_path / "gateway.log"), stdin=-1, stdout=-1, stderr=subprocess.DEVNULL
    )
    gone = Gone([])
    try:
        gateway = RawClient(process)
        await gateway.initialize()
        for n in range(IN_FLIGHT):
            await gateway.call(f"slow-{n}", "sleep", seconds=600)
        await gateway.request("probe", "ping")  # answered once the slow calls are in the dispatcher
        await gateway.answer_to("probe")
        procs = descendants_of(process.pid)
        async with trio.open_nursery() as nursery:
            await gateway.close_stdin()
            gone = Gone(procs)
            gone.start(nursery)
            answers = [orjson.loads(line) for line in (await gateway.rest_of_stdout()).splitlines()]
        assert sorted(answer["id"] for answer in answers) == sorted(f"slow-{n}" for n in range(IN_FLIGHT))
        assert all(answer["error"]["code"] == -32000 for answer in answers)
        assert gone.after_s is not None and gone.after_s <= BOUND_S
        assert await gateway.wait_exit() == 0
    finally:
        await end_all(process, gone)


async def test_a_stdin_read_from_a_file_ends_without_cutting_short_the_calls_it_made(tmp_path: Path) -> None:
    """`< requests.jsonl` is no client that quits: its last call gets the whole drain (shutdown_s), not the
    share a closed pipe gets, and is answered."""
    config = family_config(tmp_path)
    info = {"name": "file", "version": "0"}
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 1}},
        },
    ]
    (tmp_path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in requests))
    with (tmp_path / "requests.jsonl").open("rb") as stdin:
        done = await trio.run_process(
            gateway_argv(config, tmp_path / "gateway.log"), stdin=stdin, capture_stdout=True, check=False
        )
    answers = {answer["id"]: answer for answer in map(orjson.loads, done.stdout.splitlines())}
    assert done.returncode == 0 and "result" in answers[2], answers
