"""The bench's extra scenarios: a big catalog, start-up with many backends, idle memory, many idle
WebSocket sessions, and a backend killed with calls in flight. Each returns a dict of figures."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import orjson
import trio
from loguru import logger
from proctools import children, rss_kib, terminate
from trio_websocket import HandshakeError, open_websocket_url

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
TEST_BACKEND: Final = ROOT / "tests/backends/testbackend.py"
SESSIONS_DEADLINE_S: Final = 300.0  # 1,000 sessions take ~10 s on 2 cores
INITIALIZE: Final = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"},
}


def write_config(folder: Path, name: str, backends: list[list[str]], *extra: str) -> Path:
    """A gateway config with one backend per argv (run by this Python), health pings off, quick restarts;
    `extra` lines are appended (a [websocket] table, say). Every backend is pinned to the initialize era:
    the SDK's echo server answers server/discover, so under era "auto" it would become a 2026-07-28
    backend and the bench would measure another path than the one it has always measured."""
    lines = ["[gateway]", 'name = "bench-gateway"', "startup_timeout_s = 120", "page_size = 100"]
    for index, argv in enumerate(backends):
        lines += [
            "[[backends]]",
            f'name = "b{index}"',
            f"command = {orjson.dumps(sys.executable).decode()}",
            f"args = {orjson.dumps(argv).decode()}",
            'era = "legacy"',
            "[backends.health]",
            "interval_s = 0",
            "[backends.restart]",
            "backoff_initial_s = 0.01",
            "max_restarts = 1000",
        ]
    lines += extra
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def gateway_config(folder: Path, backend: Path, port: int | None) -> Path:
    """The bench's gateway config for one backend: stdio only, or a WebSocket listener on `port` too."""
    websocket = ["[websocket]", f"port = {port}"] if port is not None else []
    return write_config(folder, f"bench-{backend.stem}-{port or 'stdio'}", [[str(backend)]], *websocket)


class StdioGateway:
    """A gateway subprocess serving stdio, with a line client that matches answers by id."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""
        self._next_id = 0
        self.waiting: dict[int, trio.Event] = {}
        self.answers: dict[int, dict[str, Any]] = {}
        self.arrived: dict[int, float] = {}
        self.notices: list[tuple[float, str]] = []
        self.noticed = trio.Event()  # set (and replaced) at each notification

    @classmethod
    async def start(cls, nursery: trio.Nursery, config: Path) -> StdioGateway:
        argv = [sys.executable, "-m", "actors", "serve", "--stdio", "--config", str(config)]
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT)
        )
        gateway = cls(process)
        nursery.start_soon(gateway._read)
        return gateway

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.receive_some(1 << 20):
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            now = trio.current_time()
            for line in lines:
                message = orjson.loads(line)
                request_id = message.get("id")
                if "method" in message:
                    self.notices.append((now, message["method"]))
                    self.noticed.set()
                    self.noticed = trio.Event()
                elif isinstance(request_id, int) and request_id in self.waiting:
                    self.answers[request_id], self.arrived[request_id] = message, now
                    self.waiting.pop(request_id).set()

    async def send(self, message: dict[str, Any]) -> int:
        assert self.process.stdin is not None
        self._next_id += 1
        self.waiting[self._next_id] = trio.Event()
        await self.process.stdin.send_all(
            orjson.dumps({"jsonrpc": "2.0", "id": self._next_id, **message}) + b"\n"
        )
        return self._next_id

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = await self.send({"method": method, "params": params or {}})
        await self.waiting[request_id].wait()
        return self.answers.pop(request_id)

    async def initialize(self) -> None:
        await self.request("initialize", INITIALIZE)
        assert self.process.stdin is not None
        await self.process.stdin.send_all(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    async def stop(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(15):
            if self.process.stdin is not None:
                await self.process.stdin.aclose()
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()


def _quantiles_ms(samples: list[float]) -> dict[str, float]:
    if len(samples) < 2:
        return {"p50_ms": samples[0] * 1000 if samples else float("nan"), "p99_ms": float("nan")}
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000}


async def big_catalog(folder: Path, backends: int, tools_each: int, listings: int = 5) -> dict[str, Any]:
    """Start-up to ready with many backends, then tools/list page by page over the whole catalog."""
    config = write_config(folder, "catalog", [[str(LEAN), "--tools", str(tools_each - 1)]] * backends)
    async with trio.open_nursery() as nursery:
        started = trio.current_time()
        gateway = await StdioGateway.start(nursery, config)
        await gateway.initialize()  # answered once every backend is ready
        startup_s = trio.current_time() - started
        pages: list[float] = []
        total = 0
        for _ in range(listings):
            cursor, total = None, 0
            while True:
                sent = trio.current_time()
                answer = await gateway.request("tools/list", {"cursor": cursor} if cursor else {})
                pages.append(trio.current_time() - sent)
                total += len(answer["result"]["tools"])
                if not (cursor := answer["result"].get("nextCursor")):
                    break
        rss = rss_kib(gateway.process.pid) / 1024
        await gateway.stop()
        nursery.cancel_scope.cancel()
    return {
        "backends": backends,
        "tools": total,
        "startup_to_ready_s": startup_s,
        "page_size": 100,
        "list_page": _quantiles_ms(pages),
        "gateway_rss_mib": rss,
    }


def catalog_rebuild(backends: int, tools_each: int, repeats: int = 20) -> dict[str, Any]:
    """The catalog actor's work when one backend of a big catalog goes down and comes back (in-process)."""
    sys.path.insert(0, str(ROOT))
    from actors.catalog import PREFIX_ON_COLLISION, Catalog
    from actors.protocol.envelopes import BackendReady
    from actors.runtime.supervisor import ChildRestarting

    logger.disable("actors")  # the catalog's own work, not the log lines it writes
    names = [f"b{n}" for n in range(backends)]
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = tuple({"name": f"tool_{n}", "description": "x", "inputSchema": schema} for n in range(tools_each))
    _, inbox = trio.open_memory_channel[Any](0)
    catalog = Catalog(
        order=names, request_timeouts_s=dict.fromkeys(names, 60.0), rule=PREFIX_ON_COLLISION, inbox=inbox
    )
    calls, _ = trio.open_memory_channel[Any](1)
    for name in names:
        catalog.apply(BackendReady(name, tools, calls))
    catalog.view()
    timings: list[float] = []
    for _ in range(repeats):
        for event in (ChildRestarting("b7", RuntimeError("killed"), 0.1), BackendReady("b7", tools, calls)):
            began = time.perf_counter()
            catalog.apply(event)
            catalog.view()
            timings.append(time.perf_counter() - began)
    return {"backends": backends, "tools": backends * tools_each, "rebuild": _quantiles_ms(timings)}


async def idle_memory(folder: Path, backends: int) -> dict[str, Any]:
    config = write_config(folder, "idle", [[str(LEAN)]] * backends)
    async with trio.open_nursery() as nursery:
        gateway = await StdioGateway.start(nursery, config)
        await gateway.initialize()
        await gateway.request("tools/list")
        rss = rss_kib(gateway.process.pid) / 1024
        await gateway.stop()
        nursery.cancel_scope.cancel()
    return {"backends": backends, "gateway_rss_mib": rss}


async def idle_websocket_sessions(folder: Path, sessions: int, port: int) -> dict[str, Any]:
    """Gateway RSS per idle, initialized WebSocket session."""
    limits = [
        f"max_sessions = {sessions + 10}",
        f"max_sessions_per_client = {sessions + 10}",
    ]  # all from here
    config = write_config(folder, "sessions", [[str(LEAN)]], "[websocket]", f"port = {port}", *limits)
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config)]
    process = await trio.lowlevel.open_process(argv, stderr=subprocess.DEVNULL, cwd=str(ROOT))
    url = f"ws://127.0.0.1:{port}/mcp"
    try:
        with trio.fail_after(SESSIONS_DEADLINE_S):  # a session refused for good fails the run, not hangs it
            before, after = await _open_idle_sessions(url, sessions, process.pid)
    finally:
        await terminate(process, 15)
    return {
        "sessions": sessions,
        "gateway_rss_mib_before": before / 1024,
        "gateway_rss_mib_after": after / 1024,
        "kib_per_session": (after - before) / sessions,
    }


async def _open_idle_sessions(url: str, sessions: int, gateway: int) -> tuple[float, float]:
    """Gateway RSS with one session open, then with `sessions` more (each initialized, then idle)."""
    async with trio.open_nursery() as nursery:
        ready = [trio.Event() for _ in range(sessions + 1)]
        done = trio.Event()

        async def session(index: int) -> None:
            while True:
                try:
                    connection_context = open_websocket_url(url, subprotocols=["mcp"])
                    async with connection_context as connection:
                        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
                        await connection.send_message(orjson.dumps(init).decode())
                        await connection.get_message()
                        await connection.send_message(
                            '{"jsonrpc":"2.0","method":"notifications/initialized"}'
                        )
                        ready[index].set()
                        await done.wait()
                        return
                except (OSError, HandshakeError):
                    await trio.sleep(0.05)  # the listener is not up yet

        nursery.start_soon(session, 0)
        await ready[0].wait()
        before = rss_kib(gateway)
        for index in range(1, sessions + 1):
            nursery.start_soon(session, index)
        for event in ready:
            await event.wait()
        after = rss_kib(gateway)
        done.set()
    return before, after


async def backend_kill(folder: Path, kills: int, in_flight: int) -> dict[str, Any]:
    """SIGKILL a backend with calls in flight: time to each of those calls' answers, and to its tools'
    return in tools/list."""
    config = write_config(folder, "kill", [[str(TEST_BACKEND), "--only=sleep,echo"]])
    answered: list[float] = []
    back: list[float] = []
    lost = 0
    async with trio.open_nursery() as nursery:
        gateway = await StdioGateway.start(nursery, config)
        await gateway.initialize()
        for _ in range(kills):
            (backend,) = children(gateway.process.pid) or {0}
            calls = [
                await gateway.send(
                    {"method": "tools/call", "params": {"name": "sleep", "arguments": {"seconds": 60}}}
                )
                for _ in range(in_flight)
            ]
            await trio.sleep(0.3)  # let the calls reach the backend
            killed, gone = trio.current_time(), gateway.noticed
            os.kill(backend, signal.SIGKILL)
            with trio.move_on_after(10):
                for request_id in calls:
                    if request_id in gateway.waiting:
                        await gateway.waiting[request_id].wait()
            for request_id in calls:
                if request_id in gateway.arrived:
                    answered.append(gateway.arrived.pop(request_id) - killed)
                    gateway.answers.pop(request_id, None)
                else:
                    lost += 1
            await gone.wait()  # tools/list_changed: its tools have left the catalog
            while True:  # until the restarted backend's tools are listed again
                tools = (await gateway.request("tools/list"))["result"]["tools"]
                if tools:
                    back.append(trio.current_time() - killed)
                    break
                await gateway.noticed.wait()  # tools/list_changed when the backend is back
        await gateway.stop()
        nursery.cancel_scope.cancel()
    return {
        "kills": kills,
        "calls_in_flight_each": in_flight,
        "unanswered": lost,
        "in_flight_answered": _quantiles_ms(answered),
        "tools_back": _quantiles_ms(back),
    }
