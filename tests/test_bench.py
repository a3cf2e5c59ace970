"""scripts/bench still runs and reports every path (a smoke run; speed is judged by a real run, not here)."""

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
    ]
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = orjson.loads(out.read_bytes())
    paths = {(entry["path"], entry["concurrency"]) for entry in report["results"]}
    assert paths == {
        (path, level) for path in ("direct", "gateway stdio", "gateway websocket") for level in (1, 4)
    }
    for entry in report["results"]:
        assert entry["errors"] == 0 and entry["calls_per_s"] > 0
        if entry["path"] != "direct":
            assert entry["gateway_cpu_us_per_call"] > 0 and "calls_ratio" in entry
    assert "gateway stdio" in done.stdout and "MiB" in done.stdout
