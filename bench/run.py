"""Benchmark: the same backend reached directly, through the gateway over stdio and over WebSocket, through
two floors and a naive gateway, and through FastMCP's proxy when `fastmcp` can be imported (by
--fastmcp-python, default this interpreter).

Rounds are interleaved (direct, stdio, websocket, ..., direct, ...) so the ratios hold on a noisy machine.
Two clients drive each path: a lean one of ours (orjson over pipes or a WebSocket, many calls in flight on
one connection), so that what is measured is the path, not a client library; and the official SDK's
client over stdio, what users run. Two backends: the official SDK's server (what users run) and a lean one
that answers from a template (so the gateway's own cost is visible). For each, two floors (bench/floor.py:
a bare Trio relay, and the gateway's actor shape with no logic in it) and a naive gateway
(bench/naive_gateway.py) take the gateway's place, and the report ends with issue #15's targets: the
gateway's CPU per call over the relay's and over the naive gateway's.

The gateway is measured twice over stdio: as it ships, and with [tracing] on at 100 % sampling, exporting
to a sink in the bench's process ("gateway traced", bench/tracing_cost.py).

    scripts/bench [--concurrency 1,8,32,64] [--seconds S] [--rounds R] [--backends sdk,lean]
                  [--clients lean,sdk] [--json FILE] [--fastmcp-python PYTHON]
    scripts/bench --profile FILE [--profile-concurrency N] [--profile-seconds S] [--profile-backend sdk]
                  [--stages]
    scripts/bench ... --compare-tree DIR    (another checkout's gateway beside this one's, e.g. /work/main)
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

import orjson
import trio
from auth_cost import auth_cost
from clients import Connection, Sample, SdkPeer, measure, sdk_peer, stdio_peer, stop_all, websocket_peer
from discovery_cost import discovery_cost
from gateway_profile import profile_gateway
from policy_cost import policy_cost
from proctools import peak_rss_mib
from report import guard_failures, guard_targets, machine, print_report, row, targets
from sandbox_cost import sandbox_cost
from scale import catalog_scale, rss_over_calls
from scenarios import (
    backend_kill,
    big_catalog,
    catalog_rebuild,
    gateway_config,
    idle_memory,
    idle_websocket_sessions,
)
from tracing_cost import COMPARED_TRACED, TRACED, otlp_sink, traced
from trust_cost import trust_cost

ROOT: Final = Path(__file__).resolve().parent.parent
BACKENDS: Final = {
    "sdk": ROOT / "bench/backends/sdk_echo.py",
    "lean": ROOT / "bench/backends/lean_echo.py",
}
FASTMCP_PROXY: Final = ROOT / "bench/backends/fastmcp_proxy.py"
FLOOR: Final = ROOT / "bench/floor.py"
NAIVE: Final = ROOT / "bench/naive_gateway.py"
GATEWAY: Final = [sys.executable, "-m", "actors", "serve"]
CLIENTS: Final = ("lean", "sdk")
COMPARED: Final = "gateway compared"  # --compare-tree's path


def stdio_paths(
    backend: Path,
    folder: Path,
    fastmcp_python: str | None,
    sink: str | None = None,
    compare: Path | None = None,
) -> dict[str, list[str]]:
    """Each stdio path to `backend` by name: the argv of the process the client talks to (with `sink`, an
    OTLP/HTTP endpoint, the gateway traced too; with `compare`, another tree's gateway)."""
    behind = [sys.executable, str(backend)]
    config_path = gateway_config(folder, backend, None)
    config = str(config_path)
    paths = {
        "direct": behind,
        "gateway stdio": [*GATEWAY, "--stdio", "--config", config],
        "floor: trio relay": [sys.executable, str(FLOOR), "relay", *behind],
        "floor: actor shape": [sys.executable, str(FLOOR), "shape", *behind],
        "naive gateway": [sys.executable, str(NAIVE), *behind],
    }
    if sink is not None:
        paths[TRACED] = [*GATEWAY, "--stdio", "--config", str(traced(config_path, sink))]
    if fastmcp_python:
        paths["fastmcp proxy"] = [fastmcp_python, str(FASTMCP_PROXY), *behind]
    if compare is not None:  # another tree's gateway, same config: its actors/ first on the path (-P: not
        # the working directory, this tree, which `python -m` would put before it)
        other = ["env", f"PYTHONPATH={compare}", sys.executable, "-P", "-m", "actors", "serve"]
        paths[COMPARED] = [*other, "--stdio", "--config", config]
        if sink is not None:  # and traced: a tracing change's effect on its cost within one run
            paths[COMPARED_TRACED] = [*other, "--stdio", "--config", str(traced(config_path, sink))]
    return paths


async def open_paths(
    nurseries: tuple[trio.Nursery, trio.Nursery],
    args: argparse.Namespace,
    backend: Path,
    folder: Path,
    fastmcp: bool,
) -> dict[tuple[str, str], Connection]:
    """One connection per client and path, each to a process of its own, in the order they are measured:
    the lean client's readers run in the first nursery, the SDK's client sessions in the second."""
    nursery, sdk_sessions = nurseries
    paths = stdio_paths(
        backend, folder, args.fastmcp_python if fastmcp else None, args.sink, args.compare_tree
    )
    plan: dict[tuple[str, str], Callable[[], Awaitable[Connection]]] = {}
    for client in args.clients.split(","):
        for name, argv in paths.items():
            if client == "sdk":
                plan[client, name] = partial(sdk_peer, sdk_sessions, argv, name != "direct")
            else:
                plan[client, name] = partial(stdio_peer, nursery, argv, name != "direct")
        if client == "lean":  # the SDK's client speaks stdio only
            port = free_port()
            argv = [*GATEWAY, "--config", str(gateway_config(folder, backend, port))]
            plan[client, "gateway websocket"] = partial(websocket_peer, nursery, argv, port)
    peers: dict[tuple[str, str], Connection] = {}

    async def open_one(key: tuple[str, str]) -> None:
        peers[key] = await plan[key]()

    async with trio.open_nursery() as starting:  # all at once: start-up is most of a short run
        for key in plan:
            starting.start_soon(open_one, key)
    return {key: peers[key] for key in plan}


async def run(args: argparse.Namespace) -> int:
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="bench-") as folder:
            figures = await profile_gateway(
                args.profile,
                Path(folder),
                args.profile_concurrency,
                args.profile_seconds,
                BACKENDS[args.profile_backend],
                args.stages,
            )
        if args.json:
            Path(args.json).write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))  # noqa: ASYNC240
        return 1 if figures["errors"] else 0
    levels = [int(level) for level in args.concurrency.split(",")]
    report: dict[str, Any] = {
        "machine": machine(),
        "results": [],
        "gateway_peak_rss_mib": {},
        "fastmcp": fastmcp_version(args.fastmcp_python),
    }
    with tempfile.TemporaryDirectory(prefix="bench-") as folder, otlp_sink() as args.sink:
        try:
            await _measure_all(args, levels, report, Path(folder))
        finally:
            await stop_all()
        report["targets"] = targets(report["results"])
        try:
            report["scenarios"] = await _scenarios(args, Path(folder))
        finally:
            await stop_all()  # the policy scenario's two gateways were left running after every run
    report["guard"] = guard_targets(report)
    print_report(report, args)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))  # noqa: ASYNC240
    lost = report["scenarios"].get("kill", {}).get("unanswered", 0)
    if args.guard and (missed := guard_failures(report)):
        print(f"guard: {len(missed)} target(s) not met: {'; '.join(missed)}", file=sys.stderr)
        return 1
    return 1 if lost or any(entry["errors"] for entry in report["results"]) else 0


async def _measure_all(
    args: argparse.Namespace, levels: list[int], report: dict[str, Any], folder: Path
) -> None:
    async with trio.open_nursery() as nursery:
        for backend_name in args.backends.split(","):
            async with trio.open_nursery() as sdk_sessions:
                backend, fastmcp = BACKENDS[backend_name], bool(report["fastmcp"])
                peers = await open_paths((nursery, sdk_sessions), args, backend, folder, fastmcp)
                for level in levels:
                    await _measure_level(peers, level, args, backend_name, report)
                for (client, name), peer in peers.items():
                    if peer.gateway_pid:
                        rss = peak_rss_mib(peer.gateway_pid)
                        report["gateway_peak_rss_mib"][f"{backend_name} {client} {name}"] = rss
                for peer in peers.values():
                    if isinstance(peer, SdkPeer):
                        peer.done.set()  # the SDK's clients close their sessions and stop their processes
        nursery.cancel_scope.cancel()


async def _measure_level(
    peers: dict[tuple[str, str], Connection],
    level: int,
    args: argparse.Namespace,
    backend: str,
    report: dict[str, Any],
) -> None:
    """Every path at `level` calls in flight, rounds interleaved; one result row per client and path."""
    samples = {key: Sample() for key in peers}
    for _ in range(args.rounds):
        for key, peer in peers.items():
            await measure(peer, level, args.seconds, samples[key])
    for (client, name), sample in samples.items():
        entry = row(name, sample, None if name == "direct" else samples.get((client, "direct")))
        report["results"].append({"backend": backend, "client": client, "concurrency": level, **entry})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
    if "policy" in chosen:
        results["policy"] = await policy_cost(folder, args.rounds, args.seconds * 2)
    if "trust" in chosen:
        results["trust"] = await trust_cost(folder, args.rounds, args.seconds * 2)
    if "sandbox" in chosen:  # opt-in: --scenarios sandbox (bwrap and Landlock where this kernel has them)
        results["sandbox"] = await sandbox_cost(folder, max(args.rounds, 5), args.seconds * 2)
    if "auth" in chosen:
        results["auth"] = await auth_cost(folder, args.rounds, args.seconds * 2)
    if "scale" in chosen:
        sizes = [tuple(int(n) for n in size.split("x")) for size in args.scale_sizes.split(",")]
        results["scale"] = await catalog_scale(
            folder,
            sizes,
            args.rounds,
            args.scale_calls,
            args.scale_listings,  # type: ignore[arg-type]
        )
    if "rss" in chosen:
        results["rss"] = await rss_over_calls(folder, args.rss_calls)
    if "discovery" in chosen:  # offline, in-process: the snapshot of twelve npm servers' tools
        results["discovery"] = discovery_cost()
    return results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", default="1,8,32,64", help="calls in flight, comma-separated (default 1,8,32,64)"
    )
    parser.add_argument("--seconds", type=float, default=0.4, help="per path per round (default 0.4)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--backends", default="sdk,lean", help="sdk, lean or both (default)")
    parser.add_argument("--clients", default="lean,sdk", help="lean, sdk or both (default)")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument(
        "--guard",
        action="store_true",
        help="exit 1 when a target of issue #27 is missed or not measured (the regression guard; run with "
        "--concurrency including 1,8,32 and the scale and rss scenarios)",
    )
    parser.add_argument(
        "--scenarios",
        default="catalog,memory,sessions,kill,policy,trust,auth,scale,rss,discovery",
        help="extra scenarios, comma-separated, or none (default: all ten; `sandbox`, the stdio sandbox's "
        "start latency and calls/s, only when named)",
    )
    parser.add_argument(
        "--scale-sizes",
        default="10x50,100x50",
        help="catalogs compared by the scale scenario, BACKENDSxTOOLS each (default 10x50,100x50: 500 and "
        "5,000 tools)",
    )
    parser.add_argument("--scale-calls", type=int, default=3000, help="routed calls per catalog")
    parser.add_argument("--scale-listings", type=int, default=6, help="full tools/list runs per catalog")
    parser.add_argument("--rss-calls", type=int, default=100_000, help="calls of the RSS scenario")
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
    parser.add_argument(
        "--compare-tree",
        type=Path,
        metavar="DIR",
        help="also measure the gateway of another checkout (DIR holds its actors/, e.g. /work/main) as the "
        "path 'gateway compared', interleaved with this tree's: a change's effect within one run",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="instead of the bench: profile the gateway's stdio path (lean client and backend) with "
        "cProfile, write its stats to FILE and print the top functions by own time",
    )
    parser.add_argument("--profile-concurrency", type=int, default=1, help="calls in flight (default 1)")
    parser.add_argument("--profile-seconds", type=float, default=10.0, help="of calls (default 10)")
    parser.add_argument(
        "--stages",
        action="store_true",
        help="with --profile: sample the gateway's CPU by stage of the path (bench/stages.py) instead of "
        "cProfile's functions; FILE gets the samples as JSON",
    )
    parser.add_argument(
        "--profile-backend",
        choices=sorted(BACKENDS),
        default="lean",
        help="behind the gateway (default lean)",
    )
    args = parser.parse_args()
    if args.profile:
        args.profile = Path(args.profile).resolve()
    for name, allowed in (("backends", BACKENDS), ("clients", CLIENTS)):
        unknown = set(getattr(args, name).split(",")) - set(allowed)
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(sorted(unknown))} (known: {', '.join(allowed)})")
    return args


def main() -> int:
    return trio.run(run, parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
