"""scripts/bench still runs and reports every path and scenario (a smoke run at tiny sizes; speed is judged
by a real run, not here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from support import ROOT


def test_a_tiny_bench_run_reports_every_path(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--seconds",
        "0.2",
        "--rounds",
        "1",
        "--concurrency",
        "1,4",
        "--backends",
        "lean",
        "--json",
        str(out),
        "--catalog-backends",
        "3",
        "--tools-per-backend",
        "20",
        "--memory-backends",
        "2",
        "--sessions",
        "10",
        "--kills",
        "1",
        "--kill-in-flight",
        "5",
    ]
    done = subprocess.run(
        [sys.executable, "bench/run.py", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a slow day on 2 cores; the run itself takes ~40 s
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = orjson.loads(out.read_bytes())
    paths = {(entry["path"], entry["concurrency"]) for entry in report["results"]}
    assert paths == {
        (path, level)
        for path in (
            "direct",
            "gateway stdio",
            "gateway websocket",
            "floor: trio relay",
            "floor: actor shape",
        )
        for level in (1, 4)
    }
    for entry in report["results"]:
        assert entry["errors"] == 0 and entry["calls_per_s"] > 0
        if entry["path"] != "direct":
            assert entry["gateway_cpu_us_per_call"] > 0 and "calls_ratio" in entry
    assert "gateway stdio" in done.stdout and "MiB" in done.stdout
    scenarios = report["scenarios"]
    assert scenarios["catalog"]["tools"] == 60 and scenarios["catalog"]["list_page"]["p50_ms"] > 0
    assert scenarios["catalog_rebuild"]["tools"] == 60
    assert scenarios["memory"]["gateway_rss_mib"] > 0
    assert scenarios["sessions"]["sessions"] == 10
    assert scenarios["kill"]["unanswered"] == 0 and scenarios["kill"]["tools_back"]["p50_ms"] > 0
    for line in ("catalog: 60 tools from 3 backends", "rebuild after", "idle WebSocket sessions", "SIGKILLs"):
        assert line in done.stdout
