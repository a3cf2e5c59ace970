"""Shutdown and the command line, against real processes: nothing is left running, nothing unanswered."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from support import (
    ROOT,
    RawClient,
    backend_entry,
    is_running,
    kill_quietly,
    raw_gateway,
    read_log,
    started_pids,
    wait_until_gone,
    write_config,
)

SHUTDOWN_S = 2.0
IN_FLIGHT = 40


def stubborn_config(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two backends: a well-behaved one and one that ignores both stdin EOF and SIGTERM."""
    polite, stubborn = tmp_path / "polite.state", tmp_path / "stubborn.state"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("polite", "--only=echo,sleep,spawn_child", f"--state-file={polite}"),
            backend_entry(
                "stubborn", "--only=pid", f"--state-file={stubborn}", "--ignore-stdin-eof", "--ignore-sigterm"
            ),
        ],
        shutdown_s=SHUTDOWN_S,
    )
    return config, polite, stubborn


async def start_slow_call(gateway: RawClient) -> int:
    """Put a call in flight and a grandchild process under the polite backend; return the grandchild's pid."""
    await gateway.initialize()
    await gateway.request("child", "tools/call", {"name": "spawn_child", "arguments": {}})
    grandchild = (await gateway.answer_to("child"))["result"]["structuredContent"]["pid"]
    for n in range(IN_FLIGHT):
        await gateway.request(f"slow-{n}", "tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
    await gateway.request("probe", "ping")  # once answered, the slow calls are surely in the dispatcher
    await gateway.answer_to("probe")
    return grandchild


async def every_slow_call_answered(gateway: RawClient) -> list[dict[str, object]]:
    answers = []
    pending = {f"slow-{n}" for n in range(IN_FLIGHT)}
    while pending:
        message = await gateway.receive()
        assert message["id"] in pending, f"unexpected or second answer: {message}"
        pending.remove(message["id"])
        answers.append(message)
    return answers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_answers_what_is_in_flight_and_leaves_no_process(
    tmp_path: Path, signum: signal.Signals
) -> None:
    config, polite, stubborn = stubborn_config(tmp_path)
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        grandchild = await start_slow_call(gateway)
        backends = started_pids(polite) + started_pids(stubborn)
        assert all(map(is_running, [*backends, grandchild]))
        try:
            started = trio.current_time()
            gateway.process.send_signal(signum)
            for answer in await every_slow_call_answered(gateway):
                assert answer["error"]["code"] == -32000 and "shutting down" in answer["error"]["message"]
            assert await gateway.rest_of_stdout() == b""  # nothing else, and stdout closes
            assert await gateway.wait_exit() == 0
            assert (
                trio.current_time() - started < SHUTDOWN_S + 3
            )  # a few seconds, even with a SIGTERM-proof child
            await wait_until_gone([*backends, grandchild])
        finally:
            kill_quietly([*started_pids(polite), *started_pids(stubborn), grandchild])
    log = read_log(tmp_path / "gateway.log")
    assert "shutting down" in log and "gateway stopped" in log


async def test_end_of_stdin_stops_everything(tmp_path: Path) -> None:
    config, polite, stubborn = stubborn_config(tmp_path)
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        grandchild = await start_slow_call(gateway)
        backends = started_pids(polite) + started_pids(stubborn)
        try:
            await gateway.close_stdin()
            for answer in await every_slow_call_answered(gateway):  # after the drain time, with an error
                assert answer["error"]["code"] == -32000
            assert await gateway.rest_of_stdout() == b""
            assert await gateway.wait_exit() == 0
            await wait_until_gone([*backends, grandchild])
        finally:
            kill_quietly([*started_pids(polite), *started_pids(stubborn), grandchild])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tools_prints_the_catalog_and_exits(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", "--only=echo,add"), backend_entry("beta", "--only=echo,pid")],
    )
    done = run_cli("tools", "--config", str(config))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["TOOL", "BACKEND", "BACKEND'S", "NAME", "DESCRIPTION"]
    rows = {
        line.split()[0]: line.split()[1:3] for line in lines[1:] if line and not line.startswith("backend ")
    }
    assert rows["echo"][0] == "alpha" and rows["add"][0] == "alpha"
    assert rows["beta__echo"][:2] == ["beta", "echo"]  # shown with the backend's own name
    assert "backend alpha: ready, 2 tools" in done.stdout and "backend beta: ready, 2 tools" in done.stdout


def test_tools_exits_non_zero_when_a_backend_is_down(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=echo"),
            backend_entry("broken", "--crash-on-start=4", restart={"policy": "temporary"}),
        ],
    )
    done = run_cli("tools", "--config", str(config))
    assert done.returncode == 1
    assert "echo" in done.stdout and "backend broken: stopped" in done.stdout and "code 4" in done.stdout
    assert "--crash-on-start: exiting with 4" in done.stdout  # the operator's tool shows its last stderr
    assert "Traceback" not in done.stderr


def test_check_reports_problems_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gateway]\ntool_names = "sometimes"\n\n[[backends]]\nname = "x"\n', encoding="utf-8")
    done = run_cli("check", "--config", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert f"{bad}: gateway.tool_names: 'sometimes' is not one of" in done.stderr
    assert (
        f"{bad}: backends[0].command: required key is missing (or url, for a remote backend)" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_serve_with_a_bad_config_exits_2_before_starting_anything(tmp_path: Path) -> None:
    done = run_cli("serve", "--stdio", "--config", str(tmp_path / "missing.toml"))
    assert done.returncode == 2 and done.stdout == ""
    assert f"{tmp_path / 'missing.toml'}: no such file" in done.stderr


def test_check_accepts_the_shipped_default_config() -> None:
    done = run_cli("check", "--config", "config/gateway.toml")
    assert done.returncode == 0 and "ok (2 backends)" in done.stdout


async def test_a_signal_stops_the_gateway_even_while_its_input_never_pauses(tmp_path: Path) -> None:
    """stdin is /dev/zero: one endless line that is always readable. The gateway skips it without holding
    it, and still starts its backends and hears SIGTERM (a reader that never had to wait used to keep the
    scheduler, and with it signal handling, from ever running)."""
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")])
    argv = [sys.executable, "-m", "actors", "serve", "--stdio", "--config", str(config)]
    with open("/dev/zero", "rb") as zeros:  # noqa: ASYNC230 (opening a device does not block)
        process = await trio.lowlevel.open_process(
            argv, stdin=zeros, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(ROOT)
        )
    assert process.stderr is not None
    log = b""
    try:
        with trio.fail_after(30):
            while b"[backend=alpha] initialized" not in log:
                log += await process.stderr.receive_some()
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            while chunk := await process.stderr.receive_some():
                log += chunk
            assert await process.wait() == 0
        assert b"gateway stopped" in log
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
