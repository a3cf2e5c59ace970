"""`scripts/bench --profile FILE`: the gateway's stdio path (lean client, lean backend) under cProfile, and
the functions that take its time, by own time per forwarded call.

The gateway runs as `python bench/profiled.py FILE actors serve --stdio ...` (`python -m cProfile -o FILE
-m actors ...` with the profiler on only while the bench's calls run, not during imports and start-up);
the lean client keeps N echo calls in flight for a while, then closes the gateway's stdin so that it exits
and FILE is written (`python -m pstats FILE` reads it again). cProfile counts wall time, so the time the
gateway waits for its next event (in epoll's poll) is shown apart, and the gateway is given a core of its
own while it runs (the client and the backend share the others): a process it wakes on the same core would
otherwise run inside its writes and count as theirs.
"""

from __future__ import annotations

import os
import pstats
import signal
import sys
from pathlib import Path
from typing import Any, Final

import orjson
import trio
from clients import STARTED, Sample, measure, stdio_peer
from scenarios import gateway_config
from stages import per_call

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
PROFILED: Final = ROOT / "bench/profiled.py"
TOP: Final = 25
WAIT: Final = ("~", 0, "<method 'poll' of 'select.epoll' objects>")


async def profile_gateway(
    out: Path, folder: Path, concurrency: int, seconds: float, backend: Path = LEAN, stages: bool = False
) -> dict[str, Any]:
    """Profile the gateway for `seconds` of calls to `backend`; print the top functions (or, `stages`, the
    CPU per call of each stage of the path: bench/stages.py) and return the figures."""
    config = gateway_config(folder, backend, None)
    mode = ["--stages"] if stages else []
    serve = ["actors", "serve", "--stdio", "--config", str(config)]
    argv = [sys.executable, str(PROFILED), *mode, str(out), *serve]
    ours = os.sched_getaffinity(0)
    async with trio.open_nursery() as nursery:
        peer = await stdio_peer(nursery, argv, via_gateway=True)
        process = STARTED[-1]
        _own_core(process.pid, peer.backend_pids)
        sample = Sample()
        await measure(peer, concurrency, 0.5, Sample())  # warm up, unprofiled
        process.send_signal(signal.SIGUSR1)
        await measure(peer, concurrency, seconds, sample)
        process.send_signal(signal.SIGUSR2)
        assert peer.close is not None
        await peer.close()  # end of stdin: the gateway stops, and the profile is written
        with trio.fail_after(60):
            await process.wait()
        nursery.cancel_scope.cancel()
    os.sched_setaffinity(0, ours)
    calls = len(sample.latencies)
    figures = {
        "file": str(out),
        "concurrency": concurrency,
        "backend": backend.stem,
        "calls": calls,
        "errors": sample.errors,
        "calls_per_s": calls / sample.seconds,
        "gateway_cpu_us_per_call": sample.gateway_cpu / calls * 1e6 if calls else 0.0,
    }
    if stages:
        samples = orjson.loads(out.read_bytes())["samples"]  # noqa: ASYNC240
        figures["stages"] = [
            {"stage": stage, "share": share, "us_per_call": us}
            for stage, share, us in per_call(samples, figures["gateway_cpu_us_per_call"])
        ]
        print_stages(figures)
    else:
        figures["top"] = top_functions(out, calls)
        print_profile(figures)
    return figures


def _own_core(gateway: int, others: list[int]) -> None:
    """The gateway alone on the last core; the backends and this process (the client) on the rest."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return
    os.sched_setaffinity(gateway, cores[-1:])
    for pid in [*others, os.getpid()]:
        os.sched_setaffinity(pid, cores[:-1])


def top_functions(path: Path, calls: int) -> list[dict[str, Any]]:
    """The TOP functions by own time (tottime), per forwarded call, epoll's wait apart."""
    stats: dict[Any, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for key, entry in stats.items() if key != WAIT)
    rows = []
    for key, (_, ncalls, own, cumulative, _) in stats.items():
        rows.append(
            {
                "function": _name(key),
                "calls_per_call": ncalls / calls,
                "own_us_per_call": own / calls * 1e6,
                "own_share": own / total,
                "cumulative_us_per_call": cumulative / calls * 1e6,
                "waiting": key == WAIT,
            }
        )
    rows.sort(key=lambda entry: entry["own_us_per_call"], reverse=True)
    waiting = [entry for entry in rows if entry["waiting"]]
    return waiting + [entry for entry in rows if not entry["waiting"]][:TOP]


def _name(key: tuple[str, int, str]) -> str:
    file, line, function = key
    if file == "~":
        return function
    for root in (str(ROOT) + "/", "site-packages/", f"python{sys.version_info[0]}.{sys.version_info[1]}/"):
        if root in file:
            file = file.split(root, 1)[1]
            break
    return f"{file}:{line}({function})"


def print_profile(figures: dict[str, Any]) -> None:
    print(
        f"profile: gateway stdio, lean client, backend {figures['backend']}, "
        f"{figures['concurrency']} in flight: "
        f"{figures['calls']} calls ({figures['errors']} errors), {figures['calls_per_s']:.0f} calls/s and "
        f"{figures['gateway_cpu_us_per_call']:.0f} us of gateway CPU per call under the profiler"
    )
    print(f"profile: raw stats in {figures['file']} (python -m pstats); top {TOP} by own time, per call:")
    print(f"  {'calls':>6} {'own us':>7} {'own %':>6} {'cum us':>8}  function")
    for entry in figures["top"]:
        share = "wait" if entry["waiting"] else f"{entry['own_share'] * 100:.1f}"
        print(
            f"  {entry['calls_per_call']:>6.2f} {entry['own_us_per_call']:>7.1f} {share:>6} "
            f"{entry['cumulative_us_per_call']:>8.1f}  {entry['function']}"
        )


def print_stages(figures: dict[str, Any]) -> None:
    print(
        f"stages: gateway stdio, lean client, backend {figures['backend']}, "
        f"{figures['concurrency']} in flight: "
        f"{figures['calls']} calls ({figures['errors']} errors), {figures['calls_per_s']:.0f} calls/s, "
        f"{figures['gateway_cpu_us_per_call']:.0f} us of gateway CPU per call (sampled, bench/stages.py)"
    )
    print(f"  {'stage':32} {'share':>6} {'us/call':>8}")
    for entry in figures["stages"]:
        print(f"  {entry['stage']:32} {entry['share'] * 100:>5.1f}% {entry['us_per_call']:>8.1f}")
