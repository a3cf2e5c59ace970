"""Which engine enforces which rule (actors/sandbox/plan.py), cell by cell of the probe's matrix, and how a
sandboxed run's end is classified and supervised (refused at start, killed by a limit, unavailable)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
import trio.testing

from actors.backends.errors import BackendExitedError, BackendStartError
from actors.backends.sandboxing import (
    LIMITS_BACKOFF_S,
    SandboxDeniedError,
    SandboxLimitError,
    SandboxUnavailableError,
    verdict,
)
from actors.catalog.status import BackendState, BackendStatus
from actors.config.sandbox_schema import SandboxMode, SandboxNetwork, SandboxSettings
from actors.runtime.supervisor import ChildRestarting, ChildSpec, ChildStopped, RestartPolicy, supervise_child
from actors.sandbox.plan import plan
from actors.sandbox.probe import Primitive, Primitives

YES, NO = Primitive(ok=True, detail="works"), Primitive(ok=False, detail="no")


def found(*, root: bool = True, userns: bool = True, landlock: int = 7, seccomp: bool = True) -> Primitives:
    return Primitives(
        root=root,
        userns=YES if userns else NO,
        bwrap=YES if userns else NO,
        landlock_abi=landlock,
        seccomp=YES if seccomp else NO,
        cgroup_v2=NO,
    )


REQUIRE = SandboxSettings(mode=SandboxMode.REQUIRE)


@pytest.mark.parametrize(
    ("machine", "settings", "engines", "missing"),
    [
        (found(), REQUIRE, ("bwrap", "landlock", "rlimits"), ("tasks",)),
        (found(), SandboxSettings(user="nobody"), ("bwrap", "landlock", "rlimits", "uid"), ()),
        (found(), SandboxSettings(user="root"), ("bwrap", "landlock", "rlimits", "uid"), ("tasks",)),
        (found(root=False), REQUIRE, ("bwrap", "landlock", "rlimits"), ()),
        (found(root=False), SandboxSettings(user="nobody"), ("bwrap", "landlock", "rlimits"), ("user",)),
        (found(userns=False), REQUIRE, ("landlock", "seccomp", "rlimits"), ("tasks",)),
        (found(landlock=0), REQUIRE, ("bwrap", "rlimits"), ("tasks",)),
        (
            found(userns=False, landlock=0),
            REQUIRE,
            ("seccomp", "rlimits"),
            ("read", "write", "hide", "tasks"),
        ),
        (
            found(userns=False, landlock=0, seccomp=False),
            REQUIRE,
            ("rlimits",),
            ("read", "write", "hide", "network", "tasks"),
        ),
        (
            found(userns=False),
            SandboxSettings(network=SandboxNetwork.HOST, tasks=None),
            ("landlock", "rlimits"),
            (),
        ),
    ],
)
def test_engines_per_cell(
    machine: Primitives, settings: SandboxSettings, engines: tuple[str, ...], missing: tuple[str, ...]
) -> None:
    chosen = plan(settings, machine)
    assert chosen.engines == engines
    assert chosen.missing == missing
    assert chosen.as_json()["missing"] == list(missing)


def test_verdicts() -> None:
    start = BackendStartError(
        "exited during start-up: process 9 exited with code 126", "sandbox: landlock: x"
    )
    assert isinstance(verdict(start, 126, ["sandbox: landlock: x"]), SandboxDeniedError)
    bwrap = BackendStartError("exited during start-up", "bwrap: Can't bind mount")
    assert isinstance(
        verdict(bwrap, 1, ["bwrap: Can't bind mount /x: Permission denied"]), SandboxDeniedError
    )
    died = BackendExitedError("process 9 was killed by SIGKILL")
    assert verdict(died, -signal.SIGKILL, []) is died  # anyone's SIGKILL (chaos, an operator): no long wait
    assert isinstance(verdict(died, 1, ["MemoryError"]), SandboxLimitError)
    assert isinstance(verdict(died, 128 + signal.SIGXFSZ, []), SandboxLimitError)  # bwrap's way to say it
    plain = BackendExitedError("process 9 exited with code 3")
    assert verdict(plain, 3, ["Traceback", "ValueError: bad"]) is plain
    assert verdict(died, 134, ["FATAL ERROR: JavaScript heap out of memory"]).without_stderr.startswith(
        "sandbox_limit: "
    )


async def test_unavailable_stays_down_and_limits_wait_long(autojump_clock: trio.testing.MockClock) -> None:
    async def unavailable(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise SandboxUnavailableError("sandbox_unavailable: mode=require but cannot enforce tasks")

    events_send, events = trio.open_memory_channel[object](8)
    await supervise_child(ChildSpec("fs", unavailable, RestartPolicy()), events_send)  # type: ignore[arg-type]
    (event,) = [events.receive_nowait()]
    assert isinstance(event, ChildStopped)  # no restart loop
    status = BackendStatus(name="fs", state=BackendState.STARTING, request_timeout_s=1.0)
    down = status.down(BackendState.STOPPED, event.error)
    assert down.state is BackendState.SANDBOX_UNAVAILABLE and "cannot enforce tasks" in (down.reason or "")

    async def limited(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise SandboxLimitError("sandbox_limit: process 9 exited with code 1", "MemoryError")

    events_send, events = trio.open_memory_channel[object](8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise_child, ChildSpec("fs", limited, RestartPolicy()), events_send)
        restarting = await events.receive()
        assert isinstance(restarting, ChildRestarting) and restarting.delay_s >= LIMITS_BACKOFF_S
        nursery.cancel_scope.cancel()


def test_no_parent_death_signal_in_the_bwrap_line() -> None:
    """--die-with-parent is PR_SET_PDEATHSIG: trio forks in worker threads that retire after 10 idle s, so
    it SIGKILLed every sandboxed backend ten seconds into its life (test_sandbox.py's `extra` test shows a
    backend living past that)."""
    from actors.sandbox.probe import bwrap_isolation

    for share_net in (False, True):
        line = bwrap_isolation(share_net=share_net)
        assert "--die-with-parent" not in line and "--unshare-all" in line and "--clearenv" in line


def test_the_policy_fd_is_closed_once(tmp_path: Path) -> None:
    """The launch closes its memfd after the spawn and again at the run's end: the second close must not
    close whatever file the gateway opened under the same number since (a WebSocket's, in scripts/chaos)."""
    from actors.sandbox.launch import prepare

    settings = SandboxSettings(mode=SandboxMode.AUTO)
    chosen = plan(settings, found())
    launch = prepare("t", ["/bin/true"], cwd=tmp_path, env={}, settings=settings, plan=chosen)
    launch.close_policy()
    reused = os.open(os.devnull, os.O_RDONLY)  # likely the same number
    try:
        launch.close()
        os.fstat(reused)  # still open
        assert not launch.tmp.exists()
    finally:
        os.close(reused)


def test_the_gateways_own_files_are_hidden_from_a_backend_beside_them(tmp_path: Path) -> None:
    """A backend whose cwd is the config's folder (the default) must not read the config nor the secret
    files beside it: bwrap masks each with /dev/null; Landlock alone cannot (it only grants), so `hide` is
    missing there, however the path is spelled."""
    from actors.config import load_config
    from actors.sandbox.launch import prepare

    (tmp_path / "token").write_text("s3cret\n")
    (tmp_path / "g.toml").write_text(
        '[sandbox]\nmode = "require"\n'
        '[[backends]]\nname = "a"\ncommand = "/bin/true"\nenv = { T = { file = "token" } }\n'
    )
    config = load_config(tmp_path / "g.toml")
    settings = config.sandbox_of(config.backends[0])
    assert settings is not None and set(settings.hide) >= {str(tmp_path / "g.toml"), str(tmp_path / "token")}
    spelled = f"{tmp_path}/./"  # the same folder, spelled otherwise
    for machine, masked in ((found(), True), (found(userns=False), False)):
        chosen = plan(settings, machine)
        launch = prepare("a", ["/bin/true"], cwd=Path(spelled), env={}, settings=settings, plan=chosen)
        launch.close()
        line = " ".join(launch.argv)
        assert (f"--ro-bind /dev/null {tmp_path / 'token'}" in line) is masked
        assert ("hide" in launch.missing) is not masked
