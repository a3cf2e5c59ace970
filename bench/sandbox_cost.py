"""The cost of the stdio sandbox (issue #37): it acts at spawn, not per call.
- start latency: the lean backend spawned and its initialize answered, unsandboxed and through the sandbox's
  launch (bwrap, the launcher, Landlock, rlimits), the median of STARTS each, interleaved;
- calls/s at 8 in flight: two gateways side by side over WebSocket, the lean backend behind each, one with
  [sandbox] mode = "auto" and one without, in interleaved rounds; the change is the median of the rounds'
  paired ratios.

    scripts/bench --scenarios sandbox      (or: .venv/bin/python bench/sandbox_cost.py)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import trio
from clients import Sample, measure, stop_all, websocket_peer
from trust_cost import free_port

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
STARTS: Final = 15  # per way, interleaved
ROUNDS: Final = 9  # of calls, per gateway, interleaved (when run alone)
NAMES: Final = ("off", "auto")
INITIALIZE: Final = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b"}},
        }
    )
    + "\n"
)


def config(folder: Path, name: str, port: int) -> Path:
    lines = [
        "[[backends]]",
        'name = "b0"',
        f'command = "{sys.executable}"',
        f'args = ["{LEAN}"]',
        'era = "legacy"',
        "[backends.health]",
        "interval_s = 0",
        "[websocket]",
        f"port = {port}",
        "[sandbox]",
        f'mode = "{name}"',
    ]
    path = folder / f"sandbox-{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_once(sandboxed: bool, folder: Path) -> float:
    """ms from spawn to the initialize answer of one lean backend."""
    from actors.config.sandbox_schema import SandboxMode, SandboxSettings
    from actors.sandbox.launch import prepare
    from actors.sandbox.plan import plan
    from actors.sandbox.probe import primitives

    argv, options, launch = [sys.executable, str(LEAN)], {}, None
    started = time.perf_counter()
    if sandboxed:
        settings = SandboxSettings(mode=SandboxMode.AUTO)
        launch = prepare(
            "bench", argv, cwd=folder, env={}, settings=settings, plan=plan(settings, primitives())
        )
        argv, options = launch.argv, launch.options
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=folder, **options
    ) as child:
        assert child.stdin and child.stdout
        if launch is not None:
            launch.close_policy()
        child.stdin.write(INITIALIZE.encode())
        child.stdin.flush()
        assert child.stdout.readline()
        elapsed = (time.perf_counter() - started) * 1000
        child.stdin.close()
        child.wait()
    if launch is not None:
        launch.close()
    return elapsed


def start_latency(folder: Path) -> dict[str, float]:
    from actors.sandbox.probe import primitives

    primitives()  # the probe runs once per gateway, before the first start: not a start's cost
    times: dict[str, list[float]] = {name: [] for name in NAMES}
    for _ in range(STARTS):
        for name in NAMES:
            times[name].append(start_once(name == "auto", folder))
    return {f"{name}_ms": round(statistics.median(values), 1) for name, values in times.items()}


async def sandbox_cost(folder: Path, rounds: int = 5, seconds: float = 1.0, level: int = 8) -> dict[str, Any]:
    results: dict[str, Any] = {"start": start_latency(folder)}
    async with trio.open_nursery() as nursery:
        peers = {}
        for name in NAMES:
            port = free_port()
            argv = [sys.executable, "-m", "actors", "serve", "--config", str(config(folder, name, port))]
            peers[name] = await websocket_peer(nursery, argv, port)
            answer = await peers[name].request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            assert "result" in answer, f"the {name} gateway's backend answers: {answer}"
        samples = {name: Sample() for name in NAMES}
        paired = []
        for number in range(rounds):
            rate = {}
            for name in NAMES if number % 2 == 0 else NAMES[::-1]:  # neither always goes first
                one = Sample()
                await measure(peers[name], level, seconds, one)
                rate[name] = len(one.latencies) / seconds
                samples[name].latencies += one.latencies
                samples[name].errors += one.errors
            paired.append(rate["auto"] / rate["off"])
        results["calls"] = {
            "in_flight": level,
            **{
                f"{name}_calls_per_s": round(len(s.latencies) / (rounds * seconds))
                for name, s in samples.items()
            },
            "change_percent": round((statistics.median(paired) - 1) * 100, 1),
            "errors": {name: s.errors for name, s in samples.items()},
        }
        nursery.cancel_scope.cancel()
    return results


def print_sandbox(result: dict[str, Any]) -> None:
    start, calls = result["start"], result["calls"]
    print(
        f"sandbox: backend start (spawn to initialize answered, lean backend) {start['off_ms']} ms"
        " unsandboxed,"
        f" {start['auto_ms']} ms sandboxed (medians)"
    )
    print(
        f"sandbox: {calls['in_flight']} in flight: {calls['off_calls_per_s']} calls/s unsandboxed,"
        f" {calls['auto_calls_per_s']} sandboxed ({calls['change_percent']:+.1f} %, the median of the rounds'"
        f" pairs; failed calls {calls['errors']})"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as folder:
        try:
            print_sandbox(await sandbox_cost(Path(folder), rounds=ROUNDS))
        finally:
            await stop_all()


if __name__ == "__main__":
    trio.run(main)
