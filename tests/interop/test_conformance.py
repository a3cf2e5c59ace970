"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, server mode, from npm) run
against the gateway's Streamable HTTP frontend, with the suite's fixture (tests/backends/
conformance_fixture.py) as the one backend behind it.

Two runs. 0.1.16 speaks the handshake era (2025-11-25): every scenario, active and pending, must pass.
0.2.0-alpha.12 (npm alias conformance-2026) speaks 2026-07-28, one stateless POST per request: every
scenario must pass except those listed in conformance_2026_baseline.yml (empty now), each with the reason
it cannot pass yet. The suite fails a listed check that passes, so the list only ever shrinks."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Final

import pytest
import trio
from support import INTEROP, ROOT, running, write_config

CONFORMANCE: Final = INTEROP / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CONFORMANCE_2026: Final = INTEROP / "node_modules" / "conformance-2026" / "dist" / "index.js"
BASELINE_2026: Final = INTEROP / "conformance_2026_baseline.yml"
FIXTURE: Final = ROOT / "tests" / "backends" / "conformance_fixture.py"
SANDBOXED: Final = (
    "--sandbox",
    "auto",
)  # the fixture in bwrap and Landlock where this machine has them (#37)
SUITE_DEADLINE_S: Final = 240.0
SCENARIO: Final = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)


async def run_suite(tmp_path: Path, node: Path, suite: Path, *options: str) -> tuple[int, str]:
    """The suite's server mode against a gateway whose one backend is the fixture: its exit code and
    output."""
    # roots = "client": the suite's roots/list scenarios read the calling client's roots through the bridge
    fixture = {"name": "fixture", "command": "python", "args": [str(FIXTURE)], "roots": "client"}
    config = write_config(tmp_path / "g.toml", [fixture])
    config.write_text(config.read_text() + "\n[http]\nport = 0\n")
    async with running(config) as gateway:
        assert gateway.http_url is not None
        with trio.fail_after(SUITE_DEADLINE_S):
            done = await trio.run_process(
                [str(node), str(suite), "server", "--url", gateway.http_url, *options],
                cwd=tmp_path,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    return done.returncode, done.stdout.decode() + done.stderr.decode()


def results(output: str) -> dict[str, tuple[str, int, int]]:
    """Each scenario's mark, passed and failed checks, by name."""
    return {name: (mark, int(passed), int(failed)) for mark, name, passed, failed in SCENARIO.findall(output)}


@pytest.mark.extra  # scripts/conformance's test below runs this suite twice, through the same fixture
async def test_the_conformance_suite_passes_through_the_gateway(tmp_path: Path, node: Path) -> None:
    returncode, output = await run_suite(tmp_path, node, CONFORMANCE, "--suite", "all")
    scenarios = results(output)
    failing = {name: result for name, result in scenarios.items() if result[0] != "✓" or result[2]}
    assert not failing, output[-4000:]
    assert returncode == 0, output[-4000:]
    # every scenario the pinned suite (0.1.16) has for servers, and the checks they make
    assert len(scenarios) == 32, sorted(scenarios)
    assert sum(passed for _, passed, _ in scenarios.values()) >= 45, output[-4000:]


async def test_the_2026_conformance_suite_passes_but_for_its_baseline(tmp_path: Path, node: Path) -> None:
    returncode, output = await run_suite(
        tmp_path,
        node,
        CONFORMANCE_2026,
        "--suite",
        "all",
        "--spec-version",
        "2026-07-28",
        "--expected-failures",
        str(BASELINE_2026),
    )
    assert returncode == 0, output[-6000:]
    scenarios = results(output)
    assert len(scenarios) == 40, sorted(scenarios)
    failing = {name: result for name, result in scenarios.items() if result[0] != "✓" or result[2]}
    assert not failing, output[-6000:]  # the baseline is empty: every scenario passes whole


async def test_scripts_conformance_passes_two_runs_back_to_back_on_one_gateway(node: Path) -> None:
    """scripts/conformance as a fresh clone's user runs it (after scripts/setup-interop, which `node` did):
    its own gateway and config, and a second run of the suite that finds the first run's sessions, never
    DELETEd, still there (issue #24: the second run was refused with 429). The fixture runs sandboxed."""
    with trio.fail_after(2 * SUITE_DEADLINE_S):
        done = await trio.run_process(
            [
                sys.executable,
                str(ROOT / "scripts" / "conformance.py"),
                "--suite",
                "2025",
                "--runs",
                "2",
                *SANDBOXED,
            ],
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output
    runs = [line for line in output.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert len(runs) == 2, output
    for run, line in enumerate(runs, 1):
        assert line.startswith(f"PASS conformance 0.1.16 (2025-11-25), run {run} of 2: 32/32 scenarios"), (
            output
        )
