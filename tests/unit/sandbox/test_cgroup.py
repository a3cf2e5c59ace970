"""cgroup v2 where delegated (actors/sandbox/cgroup.py), against a folder standing for the gateway's own
cgroup (this machine has cgroup v1 with an empty v2 beside it, which the probe must call "no"): what the
probe says and why, the parent made ready once (the gateway and its own descendants moved into a leaf when
its cgroup must give up its processes; someone else's process there: refused, nothing moved), each run's
cgroup and limits, its removal (cgroup.kill; a folder that stays busy is named with its backend), the
limits read from its events (kept past the removal: the run's end is explained after its stop), the
launcher's join (and its refusal), a spawn that never started, and the plan's cells."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
from loguru import logger

from actors.backends.errors import BackendExitedError
from actors.backends.process import ProcessTransport
from actors.backends.sandboxing import SandboxLimitError, verdict
from actors.config.sandbox_schema import SandboxMode, SandboxSettings
from actors.sandbox import cgroup
from actors.sandbox import exec as launcher
from actors.sandbox.cgroup import (
    LEAF,
    MIB,
    TEST_FOLDER_VARIABLE,
    CgroupParent,
    RunCgroup,
    delegation_problem,
    own_cgroup,
    write_limits,
)
from actors.sandbox.plan import plan
from actors.sandbox.probe import Primitive, Primitives, probe_cgroup_v2

YES, NO = Primitive(ok=True, detail="works"), Primitive(ok=False, detail="no")
CGROUP2_LINE = "41 31 0:38 {root} {point} rw,relatime - cgroup2 cgroup2 rw\n"
V1_LINE = "35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"


def delegated(folder: Path, *, controllers: str = "cpu memory pids", enabled: str = "") -> Path:
    """A folder with the files a delegated cgroup v2 has."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers + "\n")
    (folder / "cgroup.subtree_control").write_text(enabled + "\n")
    (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")
    return folder


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """/proc/self/cgroup and /proc/self/mountinfo as files the test writes (no test folder variable)."""
    monkeypatch.delenv(TEST_FOLDER_VARIABLE, raising=False)
    monkeypatch.setattr(cgroup, "PROC_SELF_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(cgroup, "MOUNTINFO", tmp_path / "mountinfo")
    return tmp_path


def test_the_probe_says_no_on_this_machine_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEST_FOLDER_VARIABLE, raising=False)
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        pytest.skip("a cgroup v2 machine: whether it is delegated depends on how the tests run")
    found = probe_cgroup_v2()
    assert not found.ok and found.detail  # here: "/sys/fs/cgroup/unified: memory and pids not offered ..."


def test_the_probe_finds_the_own_cgroup_under_the_cgroup2_mount(machine: Path) -> None:
    (machine / "cgroup").write_text("4:memory:/x\n0::/system.slice/gw.service\n")
    (machine / "mountinfo").write_text(V1_LINE + CGROUP2_LINE.format(root="/", point=machine / "v2"))
    own = delegated(machine / "v2" / "system.slice" / "gw.service", controllers="memory pids")
    assert own_cgroup() == (own, "own")
    assert probe_cgroup_v2() == Primitive(ok=True, detail=str(own))
    # a bind mount of part of the hierarchy (mountinfo's root field): the path is taken from there
    (machine / "mountinfo").write_text(CGROUP2_LINE.format(root="/system.slice", point=machine / "part"))
    assert own_cgroup() == (machine / "part" / "gw.service", "own")
    (machine / "mountinfo").write_text(CGROUP2_LINE.format(root="/other", point=machine / "part"))
    folder, why = own_cgroup()
    assert folder is None and "outside the cgroup2 mount" in why


def test_the_probe_says_why_not(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert own_cgroup()[1].startswith(f"{machine / 'cgroup'}: ")  # unreadable
    (machine / "cgroup").write_text("4:memory:/x\n1:name=systemd:/\n")
    assert own_cgroup() == (None, f"no cgroup v2 line (0::) in {machine / 'cgroup'} (cgroup v1 only)")
    (machine / "cgroup").write_text("0::/\n")
    (machine / "mountinfo").write_text(V1_LINE)
    assert not probe_cgroup_v2().ok and probe_cgroup_v2().detail == "no cgroup2 file system mounted"
    # a hybrid machine as this one: v2 mounted beside v1, its controllers all taken by v1
    unified = delegated(machine / "unified", controllers="")
    (machine / "mountinfo").write_text(V1_LINE + CGROUP2_LINE.format(root="/", point=unified))
    assert probe_cgroup_v2() == Primitive(
        ok=False, detail=f"{unified}: memory and pids not offered by cgroup.controllers"
    )
    (unified / "cgroup.controllers").write_text("cpu memory\n")
    assert delegation_problem(unified) == f"{unified}: pids not offered by cgroup.controllers"
    (unified / "cgroup.controllers").write_text("memory pids\n")
    assert delegation_problem(unified) is None
    closed = unified / "cgroup.subtree_control"  # root may write anything: os.access stands for the kernel
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != closed)
    assert delegation_problem(unified) == f"{closed}: not writable by this user (not delegated)"
    (unified / "cgroup.controllers").unlink()
    assert "cgroup.controllers unreadable" in (delegation_problem(unified) or "")


def test_the_test_folder_variable_stands_for_the_own_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = delegated(tmp_path / "own")
    monkeypatch.setenv(TEST_FOLDER_VARIABLE, str(folder))
    assert own_cgroup() == (folder, "test folder")
    assert probe_cgroup_v2() == Primitive(ok=True, detail=str(folder))


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


def test_its_own_children_follow_the_gateway_and_someone_elses_process_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved: list[int] = []
    monkeypatch.setattr(cgroup, "_move", lambda leaf, pid: moved.append(pid))
    child = subprocess.Popen(["sleep", "30"])
    try:
        own = delegated(tmp_path / "own")
        (own / "cgroup.procs").write_text(f"{child.pid}\n{os.getpid()}\n")
        assert CgroupParent(own).ready() is None
        assert moved == [os.getpid(), child.pid]  # the gateway first: what it starts next is born there
        shared = delegated(tmp_path / "shared")
        (shared / "cgroup.procs").write_text(f"1\n{child.pid}\n{os.getpid()}\n")  # init: not ours
        moved.clear()
        why = CgroupParent(shared).ready() or ""
        assert why.startswith(f"{shared}: processes other than the gateway's share its cgroup (1)")
        assert moved == [] and not (shared / LEAF).exists()  # nothing moved, nothing enabled
        assert (shared / "cgroup.subtree_control").read_text() == "\n"
    finally:
        child.kill()
        child.wait()


def test_a_runs_cgroup_has_its_limits_and_is_gone_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_FOLDER_VARIABLE, str(tmp_path))
    run = RunCgroup.make(tmp_path, "we/ird name\n", memory_mb=256, tasks=32)
    assert run.folder.parent == tmp_path and run.folder.name.startswith("mcp-we_ird_name_-")
    assert len(RunCgroup.make(tmp_path, "x" * 300, memory_mb=None, tasks=1).folder.name) < 80
    assert (run.folder / "memory.max").read_text() == str(256 * MIB)
    assert (run.folder / "pids.max").read_text() == "32"
    assert not (run.folder / "memory.swap.max").exists()  # no swap accounting in this "kernel"
    os.write(run.procs_fd, b"0")  # as the launcher does
    assert (run.folder / "cgroup.procs").read_text() == "0"
    run.remove()
    assert not run.folder.exists() and run.procs_fd == -1
    run.remove()  # twice: nothing left to do


def test_swap_is_closed_where_the_kernel_accounts_it(tmp_path: Path) -> None:
    (tmp_path / "memory.swap.max").write_text("max\n")
    write_limits(tmp_path, memory_mb=64, tasks=None)
    assert (tmp_path / "memory.swap.max").read_text() == "0"
    assert (tmp_path / "memory.max").read_text() == str(64 * MIB) and not (tmp_path / "pids.max").exists()


def test_what_is_left_is_killed_and_a_folder_that_stays_busy_is_named_with_its_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunCgroup.make(tmp_path, "busy one", memory_mb=16, tasks=4)
    (run.folder / "cgroup.kill").write_text("")

    def busy(folder: Path) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(cgroup, "_remove_folder", busy)
    monkeypatch.setattr(cgroup, "RMDIR_PAUSE_S", 0.0)
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING", format="{message}")
    try:
        run.remove()
    finally:
        logger.remove(sink)
    assert (run.folder / "cgroup.kill").read_text() == "1"
    assert lines == [f"cgroup {run.folder} of backend busy one could not be removed; left behind\n"]


def test_a_limit_in_its_events_explains_the_end_even_after_the_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_FOLDER_VARIABLE, str(tmp_path))
    run = RunCgroup.make(tmp_path, "hog", memory_mb=16, tasks=4)
    assert run.limit_hit() is None
    (run.folder / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\n")
    assert run.limit_hit() is None  # hit max, reclaimed, nobody killed
    (run.folder / "pids.events").write_text("max 3\n")
    assert run.limit_hit() == "tasks"
    (run.folder / "memory.events").write_text("oom 1\noom_kill 1\n")
    assert run.limit_hit() == "memory"
    died = BackendExitedError("process 9 was killed by SIGKILL")  # no words: the cgroup's events say it
    run.remove()  # the stop removes it before the end is explained (actors/backends/actor.py)
    assert not run.folder.exists()
    limited = verdict(died, -signal.SIGKILL, [], run)
    assert isinstance(limited, SandboxLimitError) and "its memory limit" in limited.without_stderr
    assert verdict(died, -signal.SIGKILL, [], None) is died  # without the cgroup: anyone's SIGKILL


def run_launcher(policy: dict[str, object], cgroup_fd: int) -> subprocess.CompletedProcess[bytes]:
    fd = os.memfd_create("policy", 0)
    os.write(fd, json.dumps({**policy, "cgroup_fd": cgroup_fd}).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        script = str(Path(launcher.__file__))
        argv = [sys.executable, "-I", script, str(fd)]
        return subprocess.run(argv, pass_fds=(fd, cgroup_fd), capture_output=True, timeout=10, check=False)
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd: Linux")
def test_the_launcher_joins_first_and_refuses_when_it_cannot(tmp_path: Path) -> None:
    probe = "import os; print(open('/proc/self/fdinfo/0').read() and sorted(os.listdir('/proc/self/fd')))"
    policy = {
        "argv": [sys.executable, "-I", "-c", probe],
        "env": {},
        "cwd": "/",
        "rlimits": {"CORE": 0},
        "landlock": None,
        "deny_inet": False,
    }
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")
    fd = os.open(procs, os.O_WRONLY)
    try:
        done = run_launcher(policy, fd)
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    assert procs.read_text() == "0"
    assert str(fd) not in json.loads(done.stdout.decode().replace("'", '"'))  # closed before the exec
    fd = os.open(procs, os.O_RDONLY)  # the kernel's "no": EBADF stands for EACCES or EBUSY
    try:
        refused = run_launcher({**policy, "argv": ["/bin/true"]}, fd)
    finally:
        os.close(fd)
    assert refused.returncode == launcher.EXIT_REFUSED
    assert refused.stderr.decode().startswith("sandbox: cgroup: cannot join the run's cgroup: ")


@attrs.define
class LaunchSpy:
    """What ProcessTransport.spawn uses of a Launch, and whether it was closed."""

    argv: list[str] = attrs.field(factory=lambda: ["/bin/true"])
    env: dict[str, str] = attrs.field(factory=dict)
    options: dict[str, object] = attrs.field(factory=dict)
    closed: list[str] = attrs.field(factory=list)

    def close(self) -> None:
        self.closed.append("close")

    def close_policy(self) -> None:
        self.closed.append("close_policy")


async def test_a_spawn_cancelled_before_its_process_started_removes_its_cgroup(tmp_path: Path) -> None:
    spy = LaunchSpy()
    with trio.CancelScope() as scope:
        scope.cancel()
        await ProcessTransport.spawn(
            ["/bin/true"],
            cwd=tmp_path,
            env={},
            max_bytes=1024,
            sandbox=spy,  # type: ignore[arg-type]
        )
    assert scope.cancelled_caught and spy.closed == ["close"]


def machine_with(*, root: bool, cgroup_v2: bool) -> Primitives:
    yes_or_no = YES if cgroup_v2 else NO
    return Primitives(root=root, userns=YES, bwrap=YES, landlock_abi=7, seccomp=YES, cgroup_v2=yes_or_no)


SETTINGS = SandboxSettings(mode=SandboxMode.REQUIRE, memory_mb=256, tasks=32)


@pytest.mark.parametrize(
    ("root", "cgroup_v2", "memory", "tasks", "missing"),
    [
        (True, True, ("cgroup", "rlimits"), ("cgroup",), ()),  # tasks as root: pids.max, not RLIMIT_NPROC
        (False, True, ("cgroup", "rlimits"), ("cgroup", "rlimits"), ()),
        (True, False, ("rlimits",), (), ("tasks",)),  # as before: root needs `user` for tasks
        (False, False, ("rlimits",), ("rlimits",), ()),
    ],
)
def test_the_plan_uses_a_delegated_cgroup_for_memory_and_tasks(
    root: bool,
    cgroup_v2: bool,
    memory: tuple[str, ...],
    tasks: tuple[str, ...],
    missing: tuple[str, ...],
) -> None:
    found = machine_with(root=root, cgroup_v2=cgroup_v2)
    chosen = plan(SETTINGS, found)
    by_cgroup = ("cgroup",) if cgroup_v2 else ()
    assert chosen.engines == ("bwrap", "landlock", *by_cgroup, "rlimits")
    assert chosen.use_cgroup is cgroup_v2
    assert chosen.enforced["memory"] == memory and chosen.enforced["tasks"] == tasks
    assert chosen.missing == missing
    only_memory = plan(attrs.evolve(SETTINGS, tasks=None), found)
    assert only_memory.use_cgroup is cgroup_v2 and "tasks" not in only_memory.enforced
    only_tasks = plan(attrs.evolve(SETTINGS, memory_mb=None), found)
    assert only_tasks.use_cgroup is cgroup_v2 and "memory" not in only_tasks.enforced
    unlimited = plan(attrs.evolve(SETTINGS, memory_mb=None, tasks=None), found)
    assert "cgroup" not in unlimited.engines  # no limit a cgroup would hold: no cgroup
