"""The run's own cgroup (actors/sandbox/cgroup.py) behind a real gateway process with a real sandboxed stdio
backend (tests/backends/hostile_stdio.py). This machine has no delegated cgroup v2, so a folder with the
files a delegated cgroup has stands for the gateway's own (MCP_GATEWAY_TEST_CGROUP, a test-only variable no
config key sets): the gateway moves into its leaf and enables memory and pids; the run gets a cgroup with
memory.max and pids.max, which the launcher joined before the exec (its "0" is in cgroup.procs while the
backend answers); /status shows cgroup enforcing memory and tasks (tasks as root without `user`, so
`require` starts it); a death its events blame on a limit (a cgroup OOM kill says nothing on stderr) is
`sandbox_limit`, its folder removed at that run's end; and the gateway's stop leaves no run's folder."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any, Final

import pytest
from admin_support import admin_gateway, backend_of, with_admin
from support import ROOT, kill_quietly, processes_tagged, toml_value, write_config

from actors.sandbox.cgroup import LEAF, MIB, TEST_FOLDER_VARIABLE

HOSTILE: Final = ROOT / "tests" / "backends" / "hostile_stdio.py"
SYSTEM_PYTHON: Final = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path(SYSTEM_PYTHON).exists() or not shutil.which("bwrap"),
    reason="the sandbox runs on Linux, with bwrap",
)


def delegated(folder: Path) -> Path:
    """The files of a delegated cgroup v2 with no controller enabled for its children yet."""
    folder.mkdir()
    (folder / "cgroup.controllers").write_text("cpu memory pids\n")
    (folder / "cgroup.subtree_control").write_text("\n")
    (folder / "cgroup.procs").write_text("")
    return folder


def sandboxed_config(folder: Path, tag: str) -> Path:
    (folder / "work").mkdir()
    hostile = {"name": "hostile", "command": SYSTEM_PYTHON, "args": [str(HOSTILE), tag], "cwd": str(folder)}
    config = write_config(folder / "cgroup.toml", [hostile])
    table = {"mode": "require", "read": ["{runtime}", str(HOSTILE.parent)], "memory_mb": 256, "tasks": 32}
    lines = ["[backends.sandbox]", *(f"{key} = {toml_value(value)}" for key, value in table.items())]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")
    return with_admin(config)


def runs(own: Path) -> list[Path]:
    return [entry for entry in own.iterdir() if entry.name.startswith("mcp-")]


def reason_of(status: dict[str, Any]) -> str:
    error = backend_of(status, "hostile")["last_error"]
    return str(error["reason"]) if error else ""


async def test_a_run_joins_a_cgroup_of_its_own_and_leaves_none_behind(tmp_path: Path) -> None:
    own = delegated(tmp_path / "cgroup")
    tag = f"sandbox-tag-{uuid.uuid4().hex}"
    log = tmp_path / "gateway.log"
    env = {TEST_FOLDER_VARIABLE: str(own)}
    async with admin_gateway(sandboxed_config(tmp_path, tag), log, env=env) as gateway:
        await gateway.client.initialize()
        await gateway.client.call(1, "echo", text="inside")
        answer = await gateway.client.answer_to(1)
        assert answer["result"]["content"][0]["text"] == "done: inside", answer
        (run,) = runs(own)
        assert run.name.startswith("mcp-hostile-")
        assert (run / "cgroup.procs").read_text() == "0"  # written by the launcher, before the exec
        assert (run / "memory.max").read_text() == str(256 * MIB)
        assert (run / "pids.max").read_text() == "32"
        assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
        assert (own / LEAF / "cgroup.procs").read_text().isdigit()  # the gateway, in its leaf

        sandbox = backend_of(await gateway.status(), "hostile")["sandbox"]
        assert "cgroup" in sandbox["engines"] and sandbox["missing"] == []
        assert sandbox["enforced"]["memory"] == ["cgroup", "rlimits"]
        assert sandbox["enforced"]["tasks"] == (["cgroup"] if os.geteuid() == 0 else ["cgroup", "rlimits"])
        assert sandbox["cgroup"] == str(run)
        assert sandbox["primitives"]["cgroup_v2"] == {"ok": True, "detail": str(own)}

        # The kernel's OOM killer in the run's cgroup: SIGKILL and no words; its events say why.
        (run / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
        kill_quietly(processes_tagged(tag))
        status = await gateway.wait_status(lambda status: "sandbox_limit" in reason_of(status))
        assert "its cgroup held it to its memory limit" in reason_of(status)
        assert not run.exists()  # removed at that run's end, before its end was explained
    assert not runs(own)  # and nothing after the gateway's stop
    text = log.read_text()
    assert "(sandbox: bwrap,landlock,cgroup,rlimits)" in text and "DEGRADED" not in text
