"""Supervisor policy. Virtual time only (autojump_clock); wait on events, never on sleeps."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from actors.config import StdioBackend
from actors.gateway import restart_policy
from actors.runtime.supervisor import (
    ChildEvent,
    ChildExitError,
    ChildFailed,
    ChildRestarting,
    ChildSpec,
    ChildStarted,
    ChildStopped,
    Restart,
    RestartPolicy,
    describe,
    supervise,
    supervise_child,
)

Start = Callable[..., Awaitable[None]]


def child(starts: Counter[str], name: str, crashes: int, *, run_s: float | None = None) -> Start:
    """A child that crashes on its first `crashes` starts, then runs (forever, or `run_s` then returns)."""

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        starts[name] += 1
        task_status.started()
        if starts[name] <= crashes:
            raise RuntimeError(f"{name} crash {starts[name]}")
        if run_s is None:
            await trio.sleep_forever()
        await trio.sleep(run_s)

    return run


async def collect(spec: ChildSpec, until: Callable[[ChildEvent], bool]) -> list[ChildEvent]:
    send, recv = trio.open_memory_channel[ChildEvent](0)
    seen: list[ChildEvent] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise_child, spec, send, random.Random(7))
        async for event in recv:
            seen.append(event)
            if until(event):
                break
        nursery.cancel_scope.cancel()
    return seen


async def test_crashing_child_restarts_alone(autojump_clock: trio.testing.MockClock) -> None:
    starts, policy = Counter[str](), RestartPolicy(max_restarts=3, backoff_initial_s=1.0)
    specs = [
        ChildSpec("flaky", child(starts, "flaky", 2), policy),
        ChildSpec("steady", child(starts, "steady", 0), policy),
    ]
    send, recv = trio.open_memory_channel[ChildEvent](0)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, specs, send)
        async for event in recv:
            if event == ChildStarted("flaky") and starts["flaky"] == 3:
                break
        nursery.cancel_scope.cancel()
    assert starts == {"flaky": 3, "steady": 1}
    assert trio.current_time() >= 0.8 * (1.0 + 2.0)  # two jittered backoffs, on the virtual clock


async def test_backoff_doubles_up_to_the_cap(autojump_clock: trio.testing.MockClock) -> None:
    starts = Counter[str]()
    policy = RestartPolicy(max_restarts=100, window_s=1000, backoff_initial_s=1.0, backoff_max_s=4.0)
    events = await collect(
        ChildSpec("c", child(starts, "c", 1000), policy),
        lambda e: isinstance(e, ChildRestarting) and starts["c"] == 6,
    )
    delays = [e.delay_s for e in events if isinstance(e, ChildRestarting)]
    expected = [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert len(delays) == len(expected)
    for delay, base in zip(delays, expected, strict=True):
        assert 0.8 * base <= delay <= 1.2 * base


async def test_intensity_exceeded_marks_failed_and_stops_spawning(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = Counter[str]()
    policy = RestartPolicy(max_restarts=3, window_s=60, backoff_initial_s=0.1)
    events = await collect(
        ChildSpec("c", child(starts, "c", 1000), policy), lambda e: isinstance(e, ChildFailed)
    )
    assert isinstance(events[-1], ChildFailed)
    assert events[-1].restarts == 4
    assert starts["c"] == 4  # the first start and three restarts; the fourth exit gives up
    await trio.sleep(1000)
    assert starts["c"] == 4


async def test_restarts_outside_the_window_are_forgotten(autojump_clock: trio.testing.MockClock) -> None:
    starts = Counter[str]()
    # Each run lasts 10s; with a 15s window at most two exits are ever inside it, below max_restarts=2.
    policy = RestartPolicy(max_restarts=2, window_s=15, backoff_initial_s=0.1, stable_after_s=1000)
    crash_later = child(starts, "c", 0, run_s=10)

    async def crashing(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await crash_later(task_status=task_status)
        raise RuntimeError("crash after 10s")

    events = await collect(ChildSpec("c", crashing, policy), lambda e: starts["c"] == 8)
    assert not any(isinstance(e, ChildFailed) for e in events)


async def test_stable_run_resets_the_backoff(autojump_clock: trio.testing.MockClock) -> None:
    starts = Counter[str]()
    policy = RestartPolicy(
        max_restarts=100, window_s=10, backoff_initial_s=1.0, backoff_max_s=30, stable_after_s=50
    )

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        starts["c"] += 1
        task_status.started()
        await trio.sleep(100 if starts["c"] == 4 else 0)  # the fourth run is stable
        raise RuntimeError("crash")

    events = await collect(
        ChildSpec("c", run, policy), lambda e: isinstance(e, ChildRestarting) and starts["c"] == 4
    )
    delays = [e.delay_s for e in events if isinstance(e, ChildRestarting)]
    assert [round(d / b) for d, b in zip(delays, [1, 2, 4, 1], strict=True)] == [1, 1, 1, 1]


async def test_transient_stays_down_after_normal_exit(autojump_clock: trio.testing.MockClock) -> None:
    starts = Counter[str]()
    policy = RestartPolicy(restart=Restart.TRANSIENT, backoff_initial_s=0.1)
    events = await collect(
        ChildSpec("c", child(starts, "c", 1, run_s=1), policy), lambda e: isinstance(e, ChildStopped)
    )
    outcomes = [type(e) for e in events if not isinstance(e, ChildStarted)]
    assert outcomes == [ChildRestarting, ChildStopped]
    assert events[-1] == ChildStopped("c", None)
    assert starts["c"] == 2


async def test_temporary_is_never_restarted(autojump_clock: trio.testing.MockClock) -> None:
    starts = Counter[str]()
    policy = RestartPolicy(restart=Restart.TEMPORARY)
    events = await collect(
        ChildSpec("c", child(starts, "c", 1), policy), lambda e: isinstance(e, ChildStopped)
    )
    assert isinstance(events[-1], ChildStopped)
    assert describe(events[-1].error) == "RuntimeError: c crash 1"
    assert starts["c"] == 1


def test_an_explained_exit_keeps_its_process_stderr_apart_from_its_reason() -> None:
    """What the catalog tells clients (the reason) never carries stderr; the log line (str) does."""
    exited = ChildExitError("process exited with code 3", "Traceback | ValueError: bad")
    assert (
        describe(ExceptionGroup("run", [exited]))
        == "process exited with code 3; last stderr: Traceback | ValueError: bad"
    )
    assert (exited.without_stderr, exited.stderr) == (
        "process exited with code 3",
        "Traceback | ValueError: bad",
    )
    quiet = ChildExitError("keys unreachable")
    assert (str(quiet), quiet.without_stderr, quiet.stderr) == ("keys unreachable", "keys unreachable", "")


async def test_failure_before_started_counts_as_a_crash(autojump_clock: trio.testing.MockClock) -> None:
    attempts = Counter[str]()

    async def never_starts(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        attempts["c"] += 1
        raise OSError("no such program")

    events = await collect(
        ChildSpec("c", never_starts, RestartPolicy(max_restarts=1, backoff_initial_s=0.1)),
        lambda e: isinstance(e, ChildFailed),
    )
    assert [type(e) for e in events] == [ChildRestarting, ChildFailed]
    assert attempts["c"] == 2


def test_the_default_backoff_is_what_the_readme_says() -> None:
    """README, Supervision: 0.5 s doubling to 30 s, reset after a 120 s run, failed past 5 restarts in 60 s
    (a backend's policy from an empty [backends.restart], as the gateway builds it)."""
    policy = restart_policy(StdioBackend(name="a", command="python"))
    assert [policy.backoff_s(attempt) for attempt in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert (policy.stable_after_s, policy.max_restarts, policy.window_s) == (120.0, 5, 60.0)
    assert sum(policy.backoff_s(attempt) for attempt in range(1, policy.max_restarts + 1)) == 15.5
