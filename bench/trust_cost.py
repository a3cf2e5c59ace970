"""The cost of pinned definitions (issue #36): two gateways side by side over WebSocket, the lean backend with
500 tools behind each, one with [trust] mode = "pin" and one without, in interleaved rounds:
- tools/list of the 500 tools: the gateway's CPU per listing and its latency (a held definition is left out
  when the catalog's view is built, so a listing reads the same prepared list either way);
- a tools/call of a pinned tool: the gateway's CPU per call (the call pays `held and name in held`: one
  look-up in an empty dict while nothing is held);
each increase is the median of the rounds' paired ratios (pinned over off, measured one after the other),
which a machine whose speed drifts within a run disturbs least;
and in this process: what the ledger costs once per definition change (the 500 tools' first sight: RFC 8785,
the scan), a relisting of the same 500 (each form recognised by equality, nothing computed), and the look-up.

    scripts/bench --scenarios trust      (or: .venv/bin/python bench/trust_cost.py)
"""

from __future__ import annotations

import gc
import socket
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any, Final

import trio
from clients import Peer, Sample, measure, stop_all, websocket_peer

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
TOOLS: Final = 500
LISTINGS: Final = 30  # per gateway per round
NAMES: Final = ("off", "pin")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(folder: Path, name: str, port: int) -> Path:
    lines = [
        "[gateway]",
        "page_size = 1000",
        "[[backends]]",
        'name = "b0"',
        f'command = "{sys.executable}"',
        f'args = ["{LEAN}", "--tools", "{TOOLS - 1}"]',
        'era = "legacy"',
        "[backends.health]",
        "interval_s = 0",
        "[websocket]",
        f"port = {port}",
        "[trust]",
        f'mode = "{name}"',
        f'path = "{folder / (name + "-trust.sqlite3")}"',
    ]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def listings(peer: Peer, count: int) -> tuple[list[float], float]:
    """`count` tools/list: each one's latency (ms), and the gateway's CPU per listing (ms)."""
    times = []
    gc.collect()
    cpu0, _ = peer.cpu()
    for _ in range(count):
        started = trio.current_time()
        answer = await peer.request("tools/list", {})
        times.append((trio.current_time() - started) * 1000)
        assert len(answer["result"]["tools"]) == TOOLS, "every tool is listed, pinned or not"
    cpu1, _ = peer.cpu()
    return times, (cpu1 - cpu0) / count * 1000


def in_process() -> dict[str, float]:
    """The ledger's own costs, in this process."""
    from actors.trust import Ledger, TrustMode

    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [
        {"name": f"tool_{n}", "description": f"Extra tool number {n}.", "inputSchema": schema}
        for n in range(TOOLS)
    ]
    firsts, relists = [], []
    for _ in range(5):
        ledger = Ledger()
        ledger.merge("b0", {}, {})
        started = time.perf_counter()
        ledger.judge("b0", TrustMode.PIN, "tool", tools)
        firsts.append((time.perf_counter() - started) * 1000)
        again = [dict(tool) for tool in tools]  # a new listing: equal forms, new objects
        started = time.perf_counter()
        assert ledger.judge("b0", TrustMode.PIN, "tool", again) == {}
        relists.append((time.perf_counter() - started) * 1000)
    empty: dict[str, str] = {}
    one = {"tool_7": "held"}
    lookups = {
        name: min(timeit.repeat(lambda h=held: bool(h and "echo" in h), number=100_000, repeat=5)) * 1e4
        for name, held in (("empty", empty), ("one_held", one))
    }  # ns per look-up
    return {
        "first_sight_500_ms": round(min(firsts), 1),
        "relist_500_ms": round(min(relists), 2),
        "held_lookup_ns": round(lookups["empty"], 1),
        "held_lookup_one_held_ns": round(lookups["one_held"], 1),
    }


async def trust_cost(
    folder: Path, rounds: int = 5, seconds: float = 1.0, levels: tuple[int, ...] = (1, 8)
) -> dict[str, Any]:
    results: dict[str, Any] = {"tools": TOOLS, "levels": {}}
    async with trio.open_nursery() as nursery:
        peers = {}
        for name in NAMES:
            port = free_port()
            argv = [sys.executable, "-m", "actors", "serve", "--config", str(config(folder, name, port))]
            peers[name] = await websocket_peer(nursery, argv, port)
        latency: dict[str, list[float]] = {name: [] for name in NAMES}
        cpu: dict[str, list[float]] = {name: [] for name in NAMES}
        for name in NAMES:
            await listings(peers[name], 2)  # warm: the first listing encodes what later ones reuse
        for _ in range(rounds):
            for name in NAMES:
                times, per_listing = await listings(peers[name], LISTINGS)
                latency[name] += times
                cpu[name].append(per_listing)
        results["tools_list"] = {
            name: {
                "median_ms": round(statistics.median(latency[name]), 3),
                "cpu_ms": round(statistics.median(cpu[name]), 3),
            }
            for name in NAMES
        }
        ratios = [pin / off for off, pin in zip(cpu["off"], cpu["pin"], strict=True)]  # each round's pair
        results["tools_list"]["cpu_increase_percent"] = round((statistics.median(ratios) - 1) * 100, 1)
        for level in levels:
            samples = {name: Sample() for name in NAMES}
            paired = []
            for _ in range(rounds):
                rounds_cpu = {}
                for name in NAMES:
                    one = Sample()
                    await measure(peers[name], level, seconds, one)
                    rounds_cpu[name] = one.gateway_cpu / max(len(one.latencies), 1)
                    samples[name].latencies += one.latencies
                    samples[name].gateway_cpu += one.gateway_cpu
                    samples[name].errors += one.errors
                paired.append(rounds_cpu["pin"] / rounds_cpu["off"])
            per_call = {name: s.gateway_cpu / len(s.latencies) * 1e6 for name, s in samples.items()}
            results["levels"][str(level)] = {
                "off_cpu_us_per_call": round(per_call["off"], 1),
                "pin_cpu_us_per_call": round(per_call["pin"], 1),
                "increase_percent": round((statistics.median(paired) - 1) * 100, 1),
                "errors": sum(s.errors for s in samples.values()),
            }
        nursery.cancel_scope.cancel()
    results["ledger"] = in_process()
    return results


def print_trust(result: dict[str, Any]) -> None:
    listing = result["tools_list"]
    print(
        f"trust: tools/list of {result['tools']} tools, gateway CPU per listing {listing['off']['cpu_ms']} ms"
        f" off, {listing['pin']['cpu_ms']} ms pinned ({listing['cpu_increase_percent']:+.1f} %, the median of"
        f" the rounds' pairs); latency"
        f" {listing['off']['median_ms']} ms off, {listing['pin']['median_ms']} ms pinned (medians)"
    )
    for level, figures in result["levels"].items():
        print(
            f"trust: {level} in flight: gateway CPU per call of a pinned tool"
            f" {figures['pin_cpu_us_per_call']}"
            f" us, {figures['off_cpu_us_per_call']} us off ({figures['increase_percent']:+.1f} %;"
            f" errors {figures['errors']})"
        )
    ledger = result["ledger"]
    print(
        f"trust: in-process, {result['tools']} tools first seen {ledger['first_sight_500_ms']} ms (once per"
        f" definition change), listed again unchanged {ledger['relist_500_ms']} ms; a call's held check"
        f" {ledger['held_lookup_ns']} ns ({ledger['held_lookup_one_held_ns']} ns with one tool held)"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-trust-") as folder:
        try:
            print_trust(await trust_cost(Path(folder)))
        finally:
            await stop_all()


if __name__ == "__main__":
    trio.run(main)
