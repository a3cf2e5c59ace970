"""Benchmark: the same backend reached directly, through the gateway over stdio and over WebSocket, and
through FastMCP's proxy when `fastmcp` can be imported (by --fastmcp-python, default this interpreter).

Rounds are interleaved (direct, stdio, websocket, direct, ...) so the ratios hold on a noisy machine.
With the lean backend two floors are measured too (bench/floor.py): a bare Trio relay, and the
gateway's actor shape with no logic in it. The
client is a lean one of ours (orjson over pipes or a WebSocket, many calls in flight on one connection), so
what is measured is the path, not a client library. Two backends: the official SDK's server (what users
run) and a lean one that answers from a template (so the gateway's own cost is visible).

    scripts/bench [--concurrency 1,8,64] [--seconds S] [--rounds R] [--backends sdk,lean] [--json FILE]
                  [--fastmcp-python PYTHON]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import trio
from proctools import children, cpu_seconds, peak_rss_mib
from scenarios import (
    backend_kill,
    big_catalog,
    catalog_rebuild,
    idle_memory,
    idle_websocket_sessions,
    write_config,
)
from trio_websocket import WebSocketConnection, connect_websocket_url

ROOT: Final = Path(__file__).resolve().parent.parent
BACKENDS: Final = {
    "sdk": ROOT / "bench/backends/sdk_echo.py",
    "lean": ROOT / "bench/backends/lean_echo.py",
}
FASTMCP_PROXY: Final = ROOT / "bench/backends/fastmcp_proxy.py"
FLOOR: Final = ROOT / "bench/floor.py"
FLOORS: Final = {"floor: trio relay": "relay", "floor: actor shape": "shape"}  # lean backend only
STARTED: Final[list[trio.Process]] = []  # every process this run started, stopped at the end
INITIALIZE: Final = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"},
}


@attrs.define
class Peer:
    """One MCP connection with many requests in flight; answers matched by id."""

    send_line: Callable[[bytes], Awaitable[None]]
    gateway_pid: int | None  # None: the backend is reached directly
    backend_pids: list[int]
    waiting: dict[int, trio.Event] = attrs.field(factory=dict)
    replies: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    next_id: int = 0

    def deliver(self, line: bytes) -> None:
        message = orjson.loads(line)
        request_id = message.get("id")
        if isinstance(request_id, int) and request_id in self.waiting:
            self.replies[request_id] = message
            self.waiting.pop(request_id).set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id, done = self.next_id, trio.Event()
        self.waiting[request_id] = done
        await self.send_line(
            orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        await done.wait()
        return self.replies.pop(request_id)

    async def initialize(self) -> None:
        await self.request("initialize", INITIALIZE)
        await self.send_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def cpu(self) -> tuple[float, float]:
        gateway = cpu_seconds(self.gateway_pid) if self.gateway_pid else 0.0
        return gateway, sum(cpu_seconds(pid) for pid in self.backend_pids)


async def stdio_peer(nursery: trio.Nursery, argv: list[str], via_gateway: bool) -> Peer:
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(ROOT)
    )
    STARTED.append(process)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout, lock = process.stdin, process.stdout, trio.StrictFIFOLock()

    async def send_line(data: bytes) -> None:
        async with lock:  # one writer at a time on a pipe
            await stdin.send_all(data + b"\n")

    peer = Peer(send_line, process.pid if via_gateway else None, [] if via_gateway else [process.pid])
    nursery.start_soon(_read_lines, stdout, peer)
    await peer.initialize()
    if via_gateway:
        peer.backend_pids = sorted(children(process.pid))
    return peer


async def _read_lines(stream: trio.abc.ReceiveStream, peer: Peer) -> None:
    buffer = b""
    while chunk := await stream.receive_some(1 << 16):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line:
                peer.deliver(line)


async def websocket_peer(nursery: trio.Nursery, argv: list[str], port: int) -> Peer:
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(ROOT)
    )
    STARTED.append(process)
    with trio.fail_after(30):
        while True:
            try:
                connection = await connect_websocket_url(
                    nursery, f"ws://127.0.0.1:{port}/mcp", subprotocols=["mcp"]
                )
                break
            except OSError:
                await trio.sleep(0.05)

    async def send_line(data: bytes) -> None:
        await connection.send_message(data.decode())

    peer = Peer(send_line, process.pid, [])
    nursery.start_soon(_read_frames, connection, peer)
    await peer.initialize()
    peer.backend_pids = sorted(children(process.pid))
    return peer


async def _read_frames(connection: WebSocketConnection, peer: Peer) -> None:
    while True:
        peer.deliver((await connection.get_message()).encode())


@attrs.define
class Sample:
    latencies: list[float] = attrs.field(factory=list)
    errors: int = 0
    seconds: float = 0.0
    gateway_cpu: float = 0.0
    backend_cpu: float = 0.0
    client_cpu: float = 0.0


async def measure(peer: Peer, concurrency: int, seconds: float, sample: Sample) -> None:
    params = {"name": "echo", "arguments": {"text": "hello from the benchmark"}}
    gateway0, backend0 = peer.cpu()
    client0 = resource.getrusage(resource.RUSAGE_SELF)
    started = trio.current_time()
    until = started + seconds

    async def worker() -> None:
        while trio.current_time() < until:
            sent = trio.current_time()
            reply = await peer.request("tools/call", params)
            sample.latencies.append(trio.current_time() - sent)
            if "result" not in reply:
                sample.errors += 1

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    sample.seconds += trio.current_time() - started
    gateway1, backend1 = peer.cpu()
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    sample.gateway_cpu += gateway1 - gateway0
    sample.backend_cpu += backend1 - backend0
    sample.client_cpu += (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def gateway_config(folder: Path, backend: Path, port: int | None) -> Path:
    websocket = ["[websocket]", f"port = {port}"] if port is not None else []
    return write_config(folder, f"bench-{backend.stem}-{port or 'stdio'}", [[str(backend)]], *websocket)


def row(name: str, sample: Sample, direct: Sample | None) -> dict[str, Any]:
    calls = len(sample.latencies)
    quantiles = statistics.quantiles(sample.latencies, n=100, method="inclusive") if calls > 1 else [0.0] * 99
    result = {
        "path": name,
        "calls_per_s": calls / sample.seconds if sample.seconds else 0.0,
        "p50_ms": quantiles[49] * 1000,
        "p90_ms": quantiles[89] * 1000,
        "p99_ms": quantiles[98] * 1000,
        "errors": sample.errors,
        "gateway_cpu_us_per_call": sample.gateway_cpu / calls * 1e6 if calls else 0.0,
        "backend_cpu_us_per_call": sample.backend_cpu / calls * 1e6 if calls else 0.0,
        "client_cpu_us_per_call": sample.client_cpu / calls * 1e6 if calls else 0.0,
    }
    if direct is not None and direct.latencies:
        base = row("direct", direct, None)
        result["calls_ratio"] = result["calls_per_s"] / base["calls_per_s"]
        result["p50_ratio"] = result["p50_ms"] / base["p50_ms"] if base["p50_ms"] else float("nan")
    return result


async def run(args: argparse.Namespace) -> int:
    levels = [int(level) for level in args.concurrency.split(",")]
    report: dict[str, Any] = {
        "machine": machine(),
        "results": [],
        "gateway_peak_rss_mib": {},
        "fastmcp": fastmcp_version(args.fastmcp_python),
    }
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        try:
            await _measure_all(args, levels, report, Path(folder))
        finally:
            await stop_all()
        report["scenarios"] = await _scenarios(args, Path(folder))
    print_report(report, args)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))  # noqa: ASYNC240
    lost = report["scenarios"].get("kill", {}).get("unanswered", 0)
    return 1 if lost or any(entry["errors"] for entry in report["results"]) else 0


async def stop_all() -> None:
    """SIGTERM every process this run started (the gateways stop their backends), then reap them."""
    with trio.CancelScope(shield=True):
        for process in STARTED:
            if process.returncode is None:
                process.terminate()
        with trio.move_on_after(10):
            for process in STARTED:
                await process.wait()
        for process in STARTED:
            if process.returncode is None:
                process.kill()


async def _measure_all(
    args: argparse.Namespace, levels: list[int], report: dict[str, Any], folder: Path
) -> None:
    async with trio.open_nursery() as nursery:
        for backend_name in args.backends.split(","):
            backend = BACKENDS[backend_name]
            port = free_port()
            gateway = [sys.executable, "-m", "actors", "serve"]
            peers = {
                "direct": await stdio_peer(nursery, [sys.executable, str(backend)], via_gateway=False),
                "gateway stdio": await stdio_peer(
                    nursery,
                    [*gateway, "--stdio", "--config", str(gateway_config(folder, backend, None))],
                    True,
                ),
                "gateway websocket": await websocket_peer(
                    nursery,
                    [*gateway, "--config", str(gateway_config(folder, backend, port))],
                    port,
                ),
            }
            if (
                backend_name == "lean"
            ):  # what a hop costs on Trio before any gateway logic: see bench_floor.py
                for name, mode in FLOORS.items():
                    floor = [sys.executable, str(FLOOR), mode, sys.executable, str(backend)]
                    peers[name] = await stdio_peer(nursery, floor, True)
            if report["fastmcp"]:
                proxy = [args.fastmcp_python, str(FASTMCP_PROXY), sys.executable, str(backend)]
                peers["fastmcp proxy"] = await stdio_peer(nursery, proxy, True)
            for level in levels:
                samples = {name: Sample() for name in peers}
                for _ in range(args.rounds):
                    for name, peer in peers.items():
                        await measure(peer, level, args.seconds, samples[name])
                for name, sample in samples.items():
                    entry = row(name, sample, None if name == "direct" else samples["direct"])
                    report["results"].append({"backend": backend_name, "concurrency": level, **entry})
            for name, peer in peers.items():
                if peer.gateway_pid:
                    report["gateway_peak_rss_mib"][f"{backend_name} {name}"] = peak_rss_mib(peer.gateway_pid)
        nursery.cancel_scope.cancel()


def fastmcp_version(python: str) -> str | None:
    """fastmcp's version as `python` imports it, or None when it cannot."""
    try:
        done = subprocess.run(
            [python, "-c", "import fastmcp; print(fastmcp.__version__)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


async def _scenarios(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    chosen = set(args.scenarios.split(",")) - {"none", ""}
    results: dict[str, Any] = {}
    if "catalog" in chosen:
        results["catalog"] = await big_catalog(folder, args.catalog_backends, args.tools_per_backend)
        results["catalog_rebuild"] = catalog_rebuild(args.catalog_backends, args.tools_per_backend)
    if "memory" in chosen:
        results["memory"] = await idle_memory(folder, args.memory_backends)
    if "sessions" in chosen:
        results["sessions"] = await idle_websocket_sessions(folder, args.sessions, free_port())
    if "kill" in chosen:
        results["kill"] = await backend_kill(folder, args.kills, args.kill_in_flight)
    return results


def print_scenarios(scenarios: dict[str, Any]) -> None:
    if "catalog" in scenarios:
        c, r = scenarios["catalog"], scenarios["catalog_rebuild"]
        print(
            f"catalog: {c['tools']} tools from {c['backends']} backends: ready "
            f"{c['startup_to_ready_s']:.2f}s after start; gateway RSS {c['gateway_rss_mib']:.1f} MiB"
        )
        print(
            f"catalog: tools/list page of {c['page_size']}: p50 {c['list_page']['p50_ms']:.2f} ms, "
            f"p99 {c['list_page']['p99_ms']:.2f} ms; rebuild after one backend's restart: "
            f"p50 {r['rebuild']['p50_ms']:.2f} ms, p99 {r['rebuild']['p99_ms']:.2f} ms"
        )
    if "memory" in scenarios:
        m = scenarios["memory"]
        print(f"idle: gateway RSS {m['gateway_rss_mib']:.1f} MiB with {m['backends']} backends")
    if "sessions" in scenarios:
        s = scenarios["sessions"]
        print(
            f"sessions: {s['sessions']} idle WebSocket sessions: "
            f"gateway RSS {s['gateway_rss_mib_before']:.1f} "
            f"-> {s['gateway_rss_mib_after']:.1f} MiB, {s['kib_per_session']:.1f} KiB per session"
        )
    if "kill" in scenarios:
        k = scenarios["kill"]
        print(
            f"kill: {k['kills']} SIGKILLs with {k['calls_in_flight_each']} calls in flight: answered after "
            f"p50 {k['in_flight_answered']['p50_ms']:.1f} ms, p99 {k['in_flight_answered']['p99_ms']:.1f} ms "
            f"({k['unanswered']} unanswered); tools back after p50 {k['tools_back']['p50_ms']:.0f} ms"
        )


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown cpu",
    )
    return f"{os.cpu_count()} cores, {cpu}, Python {sys.version.split()[0]}"


def print_report(report: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"bench: {report['machine']}; {args.rounds} rounds x {args.seconds:g}s per path, interleaved")
    header = (
        f"{'backend':8} {'conc':>4} {'path':18} {'calls/s':>8} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} "
        f"{'err':>4} {'gw us/call':>10} {'be us/call':>10} {'x direct':>8} {'p50 x':>6}"
    )
    print(header)
    for entry in report["results"]:
        ratio = f"{entry['calls_ratio']:.2f}" if "calls_ratio" in entry else "-"
        p50 = f"{entry['p50_ratio']:.2f}" if "p50_ratio" in entry else "-"
        print(
            f"{entry['backend']:8} {entry['concurrency']:>4} {entry['path']:18} {entry['calls_per_s']:>8.0f} "
            f"{entry['p50_ms']:>7.2f} {entry['p90_ms']:>7.2f} {entry['p99_ms']:>7.2f} {entry['errors']:>4} "
            f"{entry['gateway_cpu_us_per_call']:>10.0f} {entry['backend_cpu_us_per_call']:>10.0f} "
            f"{ratio:>8} {p50:>6}"
        )
    for name, rss in report["gateway_peak_rss_mib"].items():
        print(f"gateway peak RSS ({name}): {rss:.1f} MiB")
    print_scenarios(report.get("scenarios", {}))
    if report["fastmcp"]:
        print(f"FastMCP's proxy: fastmcp {report['fastmcp']} under {args.fastmcp_python}")
    else:
        print(
            f"FastMCP's proxy: skipped ({args.fastmcp_python} cannot import fastmcp; pip install fastmcp, "
            "or point --fastmcp-python at a Python that can)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", default="1,8,64", help="calls in flight, comma-separated (default 1,8,64)"
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="per path per round (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--backends", default="sdk,lean", help="sdk, lean or both (default)")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument(
        "--scenarios",
        default="catalog,memory,sessions,kill",
        help="extra scenarios, comma-separated, or none (default: all four)",
    )
    parser.add_argument("--catalog-backends", type=int, default=50, help="backends of the big catalog")
    parser.add_argument("--tools-per-backend", type=int, default=200, help="tools each (default 200)")
    parser.add_argument("--memory-backends", type=int, default=10, help="backends of the idle-RSS run")
    parser.add_argument("--sessions", type=int, default=1000, help="idle WebSocket sessions (default 1000)")
    parser.add_argument("--kills", type=int, default=5, help="backend kills (default 5)")
    parser.add_argument("--kill-in-flight", type=int, default=20, help="calls in flight at each kill")
    parser.add_argument(
        "--fastmcp-python",
        default=os.environ.get("FASTMCP_PYTHON", sys.executable),
        help="a Python that can import fastmcp, for the FastMCP proxy rows (default: this one)",
    )
    return trio.run(run, parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
