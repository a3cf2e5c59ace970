"""cgroup v2 where delegated (actors/sandbox/cgroup.py), against a folder standing for the gateway's own
cgroup (this machine has cgroup v1 with an empty v2 beside it, which the probe must call "no"): what the
probe says, the parent made ready once (the gateway moved into a leaf when its cgroup must give up its own
processes), each run's cgroup and limits, its removal, the limits read from its events, and the plan."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from actors.backends.errors import BackendExitedError
from actors.backends.sandboxing import SandboxLimitError, verdict
from actors.config.sandbox_schema import SandboxMode, SandboxSettings
from actors.sandbox.cgroup import (
    LEAF,
    MIB,
    TEST_FOLDER_VARIABLE,
    CgroupParent,
    RunCgroup,
    delegation_problem,
    own_cgroup,
)
from actors.sandbox.plan import plan
from actors.sandbox.probe import Primitive, Primitives, probe_cgroup_v2

YES, NO = Primitive(ok=True, detail="works"), Primitive(ok=False, detail="no")


def delegated(folder: Path, *, controllers: str = "cpu memory pids", enabled: str = "") -> Path:
    """A folder with the files a delegated cgroup v2 has."""
    folder.mkdir(exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers + "\n")
    (folder / "cgroup.subtree_control").write_text(enabled + "\n")
    (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")
    return folder


def test_the_probe_says_no_here_and_yes_where_memory_and_pids_are_delegated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TEST_FOLDER_VARIABLE, raising=False)
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists():  # this machine: v1, or v2 without them
        assert not probe_cgroup_v2().ok and probe_cgroup_v2().detail
    folder = delegated(tmp_path / "own")
    monkeypatch.setenv(TEST_FOLDER_VARIABLE, str(folder))
    assert own_cgroup() == (folder, "test folder")
    assert probe_cgroup_v2() == Primitive(ok=True, detail=str(folder))
    (folder / "cgroup.controllers").write_text("cpu memory\n")
    assert delegation_problem(folder) == f"{folder}: pids not offered by cgroup.controllers"
    (folder / "cgroup.controllers").unlink()
    assert "cgroup.controllers unreadable" in (delegation_problem(folder) or "")


def test_the_parent_is_made_ready_once_moving_the_gateway_into_a_leaf(tmp_path: Path) -> None:
    ready = delegated(tmp_path / "enabled", enabled="memory pids")
    assert CgroupParent(ready).ready() is None and not (ready / LEAF).exists()  # nothing to move
    own = delegated(tmp_path / "own")
    parent = CgroupParent(own)
    assert parent.ready() is None
    assert (own / LEAF / "cgroup.procs").read_text() == str(os.getpid())  # the gateway left its cgroup
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    (own / "cgroup.subtree_control").write_text("changed")
    assert parent.ready() is None and (own / "cgroup.subtree_control").read_text() == "changed"  # once
    broken = delegated(tmp_path / "broken")
    (broken / "cgroup.subtree_control").unlink()
    (broken / "cgroup.subtree_control").mkdir()  # the kernel refuses: reported, and remembered
    why = CgroupParent(broken).ready()
    assert why is not None and why.startswith(f"{broken}: cannot enable memory and pids")


def test_a_runs_cgroup_has_its_limits_and_is_gone_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_FOLDER_VARIABLE, str(tmp_path))
    run = RunCgroup.make(tmp_path, "we/ird name\n", memory_mb=256, tasks=32)
    assert run.folder.parent == tmp_path and run.folder.name.startswith("mcp-we_ird_name_-")
    assert (run.folder / "memory.max").read_text() == str(256 * MIB)
    assert (run.folder / "pids.max").read_text() == "32"
    os.write(run.procs_fd, b"0")  # as the launcher does
    assert (run.folder / "cgroup.procs").read_text() == "0"
    assert run.limit_hit() is None
    (run.folder / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert run.limit_hit() == "memory"
    died = BackendExitedError("process 9 was killed by SIGKILL")  # no words: the cgroup's events say it
    limited = verdict(died, -signal.SIGKILL, [], run)
    assert isinstance(limited, SandboxLimitError) and "its memory limit" in limited.without_stderr
    (run.folder / "memory.events").write_text("oom_kill 0\n")
    (run.folder / "pids.events").write_text("max 3\n")
    assert run.limit_hit() == "tasks"
    run.remove()
    assert not run.folder.exists() and run.procs_fd == -1
    run.remove()  # twice: nothing left to do


SETTINGS = SandboxSettings(mode=SandboxMode.REQUIRE, memory_mb=256, tasks=32)


@pytest.mark.parametrize("root", [True, False])
def test_the_plan_uses_a_delegated_cgroup_for_memory_and_tasks_as_root_too(root: bool) -> None:
    machine = Primitives(root=root, userns=YES, bwrap=YES, landlock_abi=7, seccomp=YES, cgroup_v2=YES)
    chosen = plan(SETTINGS, machine)
    assert chosen.engines == ("bwrap", "landlock", "cgroup", "rlimits")
    assert chosen.enforced["memory"] == ("cgroup", "rlimits")
    assert chosen.enforced["tasks"] == (("cgroup",) if root else ("cgroup", "rlimits"))
    assert chosen.missing == ()  # as root without `user`, tasks is enforced now
    unlimited = plan(SandboxSettings(mode=SandboxMode.REQUIRE, memory_mb=None, tasks=None), machine)
    assert "cgroup" not in unlimited.engines  # no limit a cgroup would hold: no cgroup
