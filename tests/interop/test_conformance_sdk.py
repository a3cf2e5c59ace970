"""Both conformance suites through the gateway, with a server built on the official Python SDK (2.3) behind
it: tests/backends/sdk_everything.py, one stdio process type that serves both eras, as the python-sdk's
everything-server does (issue #24). The config is the default one: the backend has no `era` key.

Each suite runs twice back to back on one gateway, so what a first run leaves behind (sessions the suite's
TypeScript client never deletes, parked calls, subscriptions) must not spoil the second. Every check that
passes on a direct connection to the SDK server must pass through the gateway too: a client is served at
least as well as a direct connection of its era would serve it (DESIGN.md, round 3). The direct baseline,
measured by serving the same file with `--http PORT` and running each suite's `server --url` at it (the
first test here does so, to keep the numbers honest):
0.1.16 `--suite all`: 32 scenarios, 44 checks passed (server-sse-polling only warns: its client negotiates
2025-03-26, where the SDK sends no priming event); 0.2.0-alpha.12 `--suite all --spec-version 2026-07-28`:
40 scenarios, 152 checks passed, nothing skipped, no warning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import trio
from support import DEADLINE_S, ROOT, running, with_http, write_config
from test_conformance import CONFORMANCE, CONFORMANCE_2026, results
from test_http_backends import free_port

SDK_SERVER: Final = ROOT / "tests" / "backends" / "sdk_everything.py"
RUNS: Final = 2
RUN_DEADLINE_S: Final = 120.0  # one run takes ~3 s (0.1.16) or ~10 s (2026); only a hung run gets near this
PASSED: Final = "SUCCESS"
RESULTS_DIR: Final = re.compile(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$")  # server-NAME-TIME
NEUTRAL: Final = "INFO"  # what the suite reports without judging (e.g. "SSE streams are optional")


@attrs.frozen
class Baseline:
    """What a direct connection to the SDK server gets from a suite (see the module's docstring)."""

    scenarios: int
    passed: int
    warnings: frozenset[tuple[str, str]] = frozenset()  # (scenario, check id): only warned about directly


DIRECT_2025: Final = Baseline(
    scenarios=32,
    passed=44,
    warnings=frozenset(
        {("server-sse-polling", "server-sse-priming-event"), ("server-sse-polling", "server-sse-retry-field")}
    ),
)
DIRECT_2026: Final = Baseline(scenarios=40, passed=152)


@attrs.frozen
class Run:
    """One run of a suite: its exit code, scenarios, checks passed, and every other check but INFO."""

    number: int
    returncode: int
    scenarios: int
    passed: int
    others: tuple[tuple[str, str, str, str], ...]  # (scenario, check id, status, error)

    def gives(self, direct: Baseline) -> bool:
        """Whether this run is exactly that baseline: no better, no worse."""
        others = {(scenario, check) for scenario, check, _, _ in self.others}
        counts = (self.returncode, self.scenarios, self.passed)
        return counts == (0, direct.scenarios, direct.passed) and others == direct.warnings

    def shortfalls(self, direct: Baseline) -> list[str]:
        """How this run falls short of a direct connection; empty when it does not."""
        problems = []
        if self.returncode != 0:
            problems.append(f"exit {self.returncode}")
        if self.scenarios != direct.scenarios:
            problems.append(f"{self.scenarios} scenarios, not {direct.scenarios}")
        if self.passed < direct.passed:
            problems.append(f"{self.passed} checks passed, fewer than {direct.passed}")
        for scenario, check, status, error in self.others:
            if (scenario, check) not in direct.warnings:
                problems.append(f"{scenario}: {check} {status}: {error[:200]}")
        return [f"run {self.number}: {problem}" for problem in problems]


def gateway_config(tmp_path: Path, **http: Any) -> Path:
    """The default config: the SDK server its one stdio backend, an HTTP listener on a free port."""
    backend = {"name": "everything", "command": "python", "args": [str(SDK_SERVER)]}
    return with_http(write_config(tmp_path / "g.toml", [backend]), **http)


def checks(output_dir: Path) -> list[tuple[str, str, str, str]]:
    """Every check of a run, from the suite's `-o` directory: (scenario, check id, status, error)."""
    found = []
    for path in sorted(output_dir.glob("*/checks.json")):
        scenario = RESULTS_DIR.sub("", path.parent.name)
        for check in json.loads(path.read_text()):
            found.append((scenario, check["id"], check["status"], check.get("errorMessage") or ""))
    return found


async def run_suite(number: int, output_dir: Path, node: Path, suite: Path, url: str, *options: str) -> Run:
    """One run of the suite's server mode against `url`."""
    command = [str(node), str(suite), "server", "--url", url, "-o", str(output_dir), *options]
    with trio.fail_after(RUN_DEADLINE_S):
        done = await trio.run_process(
            command, cwd=output_dir.parent, capture_stdout=True, capture_stderr=True, check=False
        )
    found = checks(output_dir)
    return Run(
        number=number,
        returncode=done.returncode,
        scenarios=len(results(done.stdout.decode() + done.stderr.decode())),
        passed=sum(status == PASSED for _, _, status, _ in found),
        others=tuple(check for check in found if check[2] not in (PASSED, NEUTRAL)),
    )


async def run_twice(tmp_path: Path, node: Path, suite: Path, config: Path, *options: str) -> list[Run]:
    """The suite, RUNS times back to back against one gateway."""
    async with running(config) as gateway:
        assert gateway.http_url is not None
        return [
            await run_suite(number, tmp_path / f"run-{number}", node, suite, gateway.http_url, *options)
            for number in range(1, RUNS + 1)
        ]


@asynccontextmanager
async def served_directly(port: int) -> AsyncIterator[str]:
    """The SDK server alone, serving Streamable HTTP on `port`: its URL once it listens."""
    command = [sys.executable, str(SDK_SERVER), "--http", str(port)]
    server = await trio.lowlevel.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert server.stderr is not None
        seen = b""
        with trio.fail_after(DEADLINE_S):
            while b"Uvicorn running on" not in seen:
                chunk = await server.stderr.receive_some()
                assert chunk, seen.decode(errors="replace")
                seen += chunk
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        await server.wait()


async def test_the_sdk_server_alone_gives_both_suites_the_baseline(tmp_path: Path, node: Path) -> None:
    """The numbers the gateway is held to: what a direct connection to the SDK server gets."""
    async with served_directly(free_port()) as url:
        legacy = await run_suite(1, tmp_path / "2025", node, CONFORMANCE, url, "--suite", "all")
        options = ("--suite", "all", "--spec-version", "2026-07-28")
        modern = await run_suite(1, tmp_path / "2026", node, CONFORMANCE_2026, url, *options)
    assert legacy.gives(DIRECT_2025), legacy
    assert modern.gives(DIRECT_2026), modern


async def test_the_2025_suite_passes_whole_twice_with_the_sdk_server_behind_the_gateway(
    tmp_path: Path, node: Path
) -> None:
    # the default max_sessions_per_client (32): the suite's client opens a session per scenario and never
    # deletes one, so the second run passes the cap and must be let in by ending idle sessions (issue #24)
    runs = await run_twice(tmp_path, node, CONFORMANCE, gateway_config(tmp_path), "--suite", "all")
    shortfalls = [problem for run in runs for problem in run.shortfalls(DIRECT_2025)]
    assert not shortfalls, "\n".join(shortfalls)


async def test_the_2026_suite_passes_whole_twice_with_the_sdk_server_behind_the_gateway(
    tmp_path: Path, node: Path
) -> None:
    options = ("--suite", "all", "--spec-version", "2026-07-28")
    runs = await run_twice(tmp_path, node, CONFORMANCE_2026, gateway_config(tmp_path), *options)
    shortfalls = [problem for run in runs for problem in run.shortfalls(DIRECT_2026)]
    assert not shortfalls, "\n".join(shortfalls)
