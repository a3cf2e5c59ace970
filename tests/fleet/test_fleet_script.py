"""scripts/fleet end to end: real replicas, redis-server and HAProxy, real SDK clients of both eras; its last
line counts calls, errors and wrong answers, and it exits 0 only when both are 0."""

from __future__ import annotations

import re
import sys

import trio
from support import ROOT


async def test_fleet_script_runs_both_eras_through_haproxy_without_stickiness_without_errors(
    haproxy_binary: str,
) -> None:
    """--no-stick: HAProxy balances round robin with no stick table, so each legacy session's messages
    land on both replicas in turn (the sticky config runs under scripts/chaos --fleet below)."""
    argv = [
        sys.executable,
        str(ROOT / "scripts" / "fleet.py"),
        "--replicas",
        "2",
        "--seconds",
        "2",
        "--clients",
        "2",
        "--no-stick",
    ]
    with trio.fail_after(120):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    out = done.stdout.decode()
    lines = out.strip().splitlines()
    assert done.returncode == 0, out + done.stderr.decode()
    found = re.fullmatch(r"fleet: 2 replicas, (\d+) calls, 0 errors, 0 wrong answers", lines[-1])
    assert found and int(found[1]) > 0, lines[-1]
    eras = {line.split()[0]: int(line.split()[2]) for line in lines[1:3]}
    assert eras.keys() == {"legacy", "2026-07-28"} and all(calls > 0 for calls in eras.values())


async def test_fleet_chaos_kills_replicas_and_redis_with_no_wrong_answer_and_no_session_lost(
    haproxy_binary: str,
) -> None:
    script = str(ROOT / "scripts" / "fleet_chaos.py")
    argv = [sys.executable, script, "--replicas", "2", "--seconds", "6", "--every", "1.5", "--clients", "2"]
    with trio.fail_after(120):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    out = done.stdout.decode()
    last = out.strip().splitlines()[-1]
    assert done.returncode == 0, out + done.stderr.decode()
    found = re.fullmatch(
        r"fleet chaos: 2 replicas, (\d+) calls, \d+ errors \(0 outside a fault\), 0 wrong answers, "
        r"0 sessions lost, (\d+) faults",
        last,
    )
    assert found and int(found[1]) > 0 and int(found[2]) >= 2, last
