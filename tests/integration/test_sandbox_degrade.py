"""The sandbox's degrade paths, forced on this machine without touching the kernel: inside `bwrap
--unshare-user --disable-userns` (no user namespaces), under a seccomp filter that makes the Landlock
syscalls return ENOSYS (no Landlock), both, and as an unprivileged user. In each cell (one process running
tests/backends/sandbox_cell.py) the engines chosen, what `require` does and what `auto` still enforces on a
real launch (a write outside `write`, a connect to a loopback listener)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from support import ROOT

CELL: Final = ROOT / "tests" / "backends" / "sandbox_cell.py"
NO_LANDLOCK: Final = r"""
import errno, os, sys, pyseccomp
rule = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
    rule.add_rule(pyseccomp.ERRNO(errno.ENOSYS), name)
rule.load()
os.execv(sys.argv[1], sys.argv[1:])
"""
NO_USERNS: Final = ("bwrap", "--unshare-user", "--disable-userns", "--dev-bind", "/", "/", "--")
NOBODY: Final = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")

pytestmark = pytest.mark.skipif(  # scripts/test installs bwrap and then says so: no skip is then allowed
    not os.environ.get("MCP_GATEWAY_REQUIRE_SANDBOX")
    and (os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("setpriv") is None),
    reason="the cells need root (to become nobody), bwrap and setpriv",
)


@pytest.fixture(scope="module")
def folders() -> Iterator[tuple[Path, Path]]:
    top = Path(tempfile.mkdtemp(prefix="sandbox-cells-", dir="/tmp"))
    top.chmod(0o755)
    for name in ("outside", "work"):
        (top / name).mkdir(mode=0o777)
        (top / name).chmod(0o777)
    yield top / "outside", top / "work"
    shutil.rmtree(top, ignore_errors=True)


def run_cell(prefix: tuple[str, ...], folders: tuple[Path, Path], *, nobody: bool = False) -> dict[str, Any]:
    import subprocess

    outside, work = (str(folder) for folder in folders)
    python = [sys.executable, str(CELL)]
    if nobody:  # this venv's Python may sit in /root: the system's, with the repo and the venv's packages
        paths = [str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))]
        code = f"import sys; sys.path[:0] = {paths!r}; sys.argv[1:] = {[outside, work]!r}; "
        code += f"exec(compile(open({str(CELL)!r}).read(), 'cell', 'exec'))"
        python = ["/usr/bin/python3", "-I", "-c", code]
    done = subprocess.run(
        [*prefix, *python, *([] if nobody else [outside, work])],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def no_landlock(prefix: tuple[str, ...] = ()) -> tuple[str, ...]:
    return (*prefix, sys.executable, "-c", NO_LANDLOCK)


@pytest.mark.parametrize(
    ("cell", "engines", "missing", "ran"),
    [
        ("root", ["bwrap", "landlock", "rlimits"], ["tasks"], "write:refused connect:refused"),
        ("no userns", ["landlock", "seccomp", "rlimits"], ["tasks"], "write:refused connect:refused"),
        ("no landlock", ["bwrap", "rlimits"], ["tasks"], "write:refused connect:refused"),
        (
            "no userns, no landlock",
            ["seccomp", "rlimits"],
            ["read", "write", "hide", "tasks"],
            "write:done connect:refused",
        ),
        ("nobody", ["bwrap", "landlock", "rlimits"], [], "write:refused connect:refused"),
    ],
)
def test_cell(
    folders: tuple[Path, Path], cell: str, engines: list[str], missing: list[str], ran: str
) -> None:
    prefix = {
        "root": (),
        "no userns": NO_USERNS,
        "no landlock": no_landlock(),
        "no userns, no landlock": no_landlock(NO_USERNS),
        "nobody": NOBODY,
    }[cell]
    result = run_cell(prefix, folders, nobody=cell == "nobody")
    found = result["primitives"]
    assert found["userns"]["ok"] is (cell not in ("no userns", "no userns, no landlock"))
    assert found["landlock"]["ok"] is ("no landlock" not in cell)
    assert found["root"] is (cell != "nobody")
    assert result["auto"]["engines"] == engines
    assert result["auto"]["missing"] == missing
    assert result["ran"] == ran, result["stderr"]
    assert result["degraded"] is bool(missing)  # auto: one DEGRADED line exactly when something is missing
    if missing:  # require: not started, and why
        assert result["require"].startswith("sandbox_unavailable: mode=require but cannot enforce ")
        assert ", ".join(missing) in result["require"]
    else:
        assert result["require"] == "starts"
