"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, server mode, from npm) run
against the gateway's Streamable HTTP frontend, with the suite's fixture (tests/backends/
conformance_fixture.py) as the one backend behind it. Every scenario, active and pending, must pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import trio
from conftest import INTEROP
from support import ROOT, running, write_config

CONFORMANCE: Final = INTEROP / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FIXTURE: Final = ROOT / "tests" / "backends" / "conformance_fixture.py"
SUITE_DEADLINE_S: Final = 240.0
SCENARIO: Final = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)


async def test_the_conformance_suite_passes_through_the_gateway(tmp_path: Path, node: Path) -> None:
    fixture = {"name": "fixture", "command": "python", "args": [str(FIXTURE)]}
    config = write_config(tmp_path / "g.toml", [fixture])
    config.write_text(config.read_text() + "\n[http]\nport = 0\n")
    async with running(config) as gateway:
        assert gateway.http_url is not None
        with trio.fail_after(SUITE_DEADLINE_S):
            done = await trio.run_process(
                [str(node), str(CONFORMANCE), "server", "--url", gateway.http_url, "--suite", "all"],
                cwd=tmp_path,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    output = done.stdout.decode() + done.stderr.decode()
    scenarios = {
        name: (mark, int(passed), int(failed)) for mark, name, passed, failed in SCENARIO.findall(output)
    }
    failing = {name: result for name, result in scenarios.items() if result[0] != "✓" or result[2]}
    assert not failing, output[-4000:]
    assert done.returncode == 0, output[-4000:]
    # every scenario the pinned suite (0.1.16) has for servers, and the checks they make
    assert len(scenarios) == 32, sorted(scenarios)
    assert sum(passed for _, passed, _ in scenarios.values()) >= 45, output[-4000:]
