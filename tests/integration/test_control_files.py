"""Several gateways on one config: each owns its control files, all start, `mcp-gateway reload` reaches
each; a planted pid file gets nobody signalled; run from another folder, the commands say what they
looked for (issues #24, #25)."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import trio
from support import DEADLINE_S, RawClient, backend_entry, gateway_argv, write_config

from actors.runtime.control import ControlFiles, config_key, process_start

GATEWAYS = 5


def private_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


@asynccontextmanager
async def gateways(tmp_path: Path, config: Path, count: int) -> AsyncIterator[list[RawClient]]:
    """`count` real `serve --stdio` processes on one config, started at once, each initialized."""
    environment = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    processes = [
        await trio.lowlevel.open_process(
            gateway_argv(config, tmp_path / f"gateway{n}.log"), stdin=-1, stdout=-1, env=environment
        )
        for n in range(count)
    ]
    clients = [RawClient(process) for process in processes]
    try:
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(client.initialize)
        yield clients
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        with trio.fail_after(DEADLINE_S):
            for process in processes:
                await process.wait()


async def command(tmp_path: Path, *argv: str, cwd: Path | None = None) -> trio.CompletedProcess[bytes]:
    environment = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    return await trio.run_process(
        [sys.executable, "-m", "actors", *argv],
        env=environment,
        cwd=cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_five_gateways_started_at_once_on_one_config_all_serve(tmp_path: Path) -> None:
    """Each has its own control file; one holds the [admin] port, and `status` lists the others."""
    folder = private_folder(tmp_path)
    config = write_config(tmp_path / "same.toml", [backend_entry("keep", "--only=echo")])
    config.write_text(config.read_text() + f"\n[admin]\nport = {free_port()}\n")
    async with gateways(tmp_path, config, GATEWAYS) as clients:
        pids = {client.process.pid for client in clients}
        for number, client in enumerate(clients):
            await client.call(number, "echo", text="up")
            assert (await client.answer_to(number))["result"]["structuredContent"] == {"text": "up"}
        key = config_key(config)
        assert {path.name for path in folder.iterdir()} == {f"mcp-gateway-{key}-{pid}.pid" for pid in pids}
        assert all((folder / name).stat().st_mode & 0o777 == 0o600 for name in os.listdir(folder))
        status = await command(tmp_path, "status", "--config", str(config))
        assert status.returncode == 0, status.stderr
        printed = status.stdout.decode().splitlines()
        shown = int(printed[0].split(", pid ")[1].split(",")[0])
        head, _, listed = printed[-1].partition(" pid ")
        assert head == f"also serving {config} (without the admin listener):"
        assert {int(pid) for pid in listed.split(", ")} == pids - {shown}
    assert list(folder.iterdir()) == []  # each removed its own files


async def test_reload_reaches_every_gateway_serving_the_config(tmp_path: Path) -> None:
    private_folder(tmp_path)
    config = write_config(tmp_path / "same.toml", [backend_entry("keep", "--only=echo")])
    async with gateways(tmp_path, config, 3) as clients:
        write_config(config, [backend_entry("keep", "--only=echo"), backend_entry("more", "--only=add")])
        done = await command(tmp_path, "reload", "--config", str(config))
        assert done.returncode == 0, done.stderr
        lines = sorted(done.stdout.decode().splitlines())
        expected = sorted(f"pid {client.process.pid}: added more; 1 backend untouched" for client in clients)
        assert lines == expected
        status = await command(tmp_path, "status", "--config", str(config))  # no [admin]: who serves it
        last = status.stderr.decode().splitlines()[-1]
        assert status.returncode == 2 and last.startswith(f"gateways serving {config}: pid ")
        assert {int(pid) for pid in last.partition(": pid ")[2].split(", ")} == {
            client.process.pid for client in clients
        }


async def test_a_planted_pid_of_another_program_gets_no_sighup(tmp_path: Path) -> None:
    folder = private_folder(tmp_path)
    config = write_config(tmp_path / "g.toml", [backend_entry("keep", "--only=echo")])
    victim = await trio.lowlevel.open_process(["sleep", "60"])
    try:
        planted = ControlFiles(folder, config_key(config), victim.pid)
        record = {"pid": victim.pid, "start": process_start(victim.pid), "config": str(config)}
        planted.pid_path.write_bytes(orjson.dumps(record))
        planted.pid_path.chmod(0o600)
        done = await command(tmp_path, "reload", "--config", str(config))
        assert done.returncode == 1
        assert (
            f"pid {victim.pid} not signalled: it is not an mcp-gateway serve process" in done.stderr.decode()
        )
        assert victim.poll() is None  # no SIGHUP reached it: sleep would have died of it
    finally:
        victim.kill()
        await victim.wait()


async def test_reload_and_status_from_another_folder_name_the_config_and_suggest_config(
    tmp_path: Path,
) -> None:
    private_folder(tmp_path)
    for name in ("reload", "status"):
        done = await command(tmp_path, name, cwd=tmp_path)
        said = done.stderr.decode()
        assert done.returncode != 0
        assert str(tmp_path / "config" / "gateway.toml") in said and "--config" in said, said
        assert "Traceback" not in said


async def test_reload_with_no_gateway_serving_the_file_says_where_it_looked_and_as_root_where_else(
    tmp_path: Path,
) -> None:
    private_folder(tmp_path)
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha")])
    done = await command(tmp_path, "reload", "--config", str(config))
    said = done.stderr.decode()
    assert done.returncode == 1 and f"no gateway is serving {config}" in said, said
    # root's folders are not a service user's: run as root, it is told how to reach the service's
    as_root = "runuser -u mcp-gateway -- env XDG_RUNTIME_DIR=/run/mcp-gateway" in said
    assert as_root == (os.geteuid() == 0), said
