"""one_for_one supervision with OTP restart types, restart intensity and jittered exponential backoff.

Imports nothing MCP: a child is any `start` function that supports `await nursery.start(start)`.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio
from loguru import logger

from actors.runtime.redact import redact


class Restart(enum.Enum):
    PERMANENT = "permanent"  # restart after any exit
    TRANSIENT = "transient"  # restart after an abnormal exit only (an exception)
    TEMPORARY = "temporary"  # never restart


@attrs.frozen
class RestartPolicy:
    restart: Restart = Restart.PERMANENT
    max_restarts: int = 5  # more than this many restarts within window_s: give up, mark failed
    window_s: float = 60.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    stable_after_s: float = 120.0  # a run at least this long resets the backoff

    def backoff_s(self, attempt: int) -> float:
        """Delay before restart number `attempt` (1-based), before jitter."""
        return min(self.backoff_initial_s * 2 ** (attempt - 1), self.backoff_max_s)


@attrs.frozen
class ChildSpec:
    id: str
    start: Callable[..., Awaitable[None]]  # supports `await nursery.start(start)`
    policy: RestartPolicy = RestartPolicy()
    kind: str = "child"  # the log context key for its lines: [backend=notes]


@attrs.frozen
class ChildStarted:
    id: str


@attrs.frozen
class ChildRestarting:
    """The child exited; it will be started again after `delay_s`."""

    id: str
    error: BaseException | None = attrs.field(eq=False)
    delay_s: float


@attrs.frozen
class ChildFailed:
    """The child exceeded its restart intensity and is left down."""

    id: str
    error: BaseException | None = attrs.field(eq=False)
    restarts: int


@attrs.frozen
class ChildStopped:
    """The child exited and its restart type says it stays down."""

    id: str
    error: BaseException | None = attrs.field(eq=False)


ChildEvent = ChildStarted | ChildRestarting | ChildFailed | ChildStopped


class ChildExitError(Exception):
    """An exit the child explains fully in its message: logged without a traceback.

    A child that runs a process may add the process's last stderr lines: `str()` (for the log) carries them,
    `without_stderr` is the reason alone (what others may be told), `stderr` the lines apart. Both are
    redacted (runtime/redact.py): the reason goes to clients' errors and the status page."""

    def __init__(self, message: str, stderr: str = "") -> None:
        message, stderr = redact(message), redact(stderr)
        super().__init__(f"{message}; last stderr: {stderr}" if stderr else message)
        self.without_stderr = message
        self.stderr = stderr


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) groups; trio nurseries always wrap what their tasks raise."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def describe(error: BaseException | None) -> str:
    """One line for the log and for the catalog's `reason`: the message of each exception in the group,
    redacted (an exception's text may quote a URL with its password, or a backend's words)."""
    if error is None:
        return "exited normally"
    return redact(
        "; ".join(
            str(leaf) if isinstance(leaf, ChildExitError) else f"{type(leaf).__name__}: {leaf}"
            for leaf in leaves(error)
        )
    )


def _final(error: BaseException | None) -> bool:
    """An exit that restarting cannot mend (its errors say `final = True`): the child stays down."""
    return error is not None and all(getattr(leaf, "final", False) for leaf in leaves(error))


def _backoff_floor_s(error: BaseException | None) -> float:
    """The least wait an exit asks for (`backoff_min_s`, e.g. a sandboxed backend killed by its limits)."""
    return max((getattr(leaf, "backoff_min_s", 0.0) for leaf in leaves(error)), default=0.0) if error else 0.0


def _traceback(error: BaseException | None) -> BaseException | None:
    """Errors the child explains itself are logged without a traceback; anything else with the whole group."""
    if error is None or all(isinstance(leaf, ChildExitError) for leaf in leaves(error)):
        return None
    return error


async def supervise(
    specs: Sequence[ChildSpec],
    events: trio.MemorySendChannel[ChildEvent],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """one_for_one: each child crashes, restarts and fails alone; siblings never see it. All children start
    at once. Returns when every child has stopped for good."""
    with events:
        async with trio.open_nursery() as nursery:
            for spec in specs:
                nursery.start_soon(supervise_child, spec, events.clone(), name=f"supervise:{spec.id}")
            task_status.started()


async def supervise_child(
    spec: ChildSpec, events: trio.MemorySendChannel[ChildEvent], jitter: random.Random | None = None
) -> None:
    policy, restarts, attempt = spec.policy, deque[float](), 0
    rng = jitter or random.Random()
    with events, logger.contextualize(**{spec.kind: spec.id}):
        while True:
            began, error = trio.current_time(), None
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(spec.start)
                    await events.send(ChildStarted(spec.id))
            except Exception as exc:  # the one boundary; Cancelled is a BaseException and passes
                error = exc
            if (
                policy.restart is Restart.TEMPORARY
                or (policy.restart is Restart.TRANSIENT and error is None)
                or _final(error)
            ):
                why = "a restart cannot mend it" if _final(error) else f"restart={policy.restart.value}"
                logger.info("stopped ({}); {} leaves it down", describe(error), why)
                await events.send(ChildStopped(spec.id, error))
                return
            now = trio.current_time()
            restarts.append(now)
            while restarts[0] <= now - policy.window_s:
                restarts.popleft()
            if len(restarts) > policy.max_restarts:
                logger.opt(exception=_traceback(error)).error(
                    "failed: {} restarts within {}s exceed max_restarts={}; left down. Last exit: {}",
                    len(restarts),
                    policy.window_s,
                    policy.max_restarts,
                    describe(error),
                )
                await events.send(ChildFailed(spec.id, error, len(restarts)))
                return
            attempt = 1 if now - began >= policy.stable_after_s else attempt + 1
            delay = max(policy.backoff_s(attempt) * rng.uniform(0.8, 1.2), _backoff_floor_s(error))
            logger.opt(exception=_traceback(error)).warning(
                "{}; restarting in {:.2f}s", describe(error), delay
            )
            await events.send(ChildRestarting(spec.id, error, delay))
            await trio.sleep(delay)


async def supervise_alone(
    spec: ChildSpec, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """One child under a supervisor of its own, whose reports nobody acts on: started once the child has
    started (or has failed at its start and is restarting); returns when it has stopped for good."""
    events, reports = trio.open_memory_channel[ChildEvent](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervise_child, spec, events)
        await reports.receive()
        task_status.started()
        await discard_reports(reports)


async def discard_reports(reports: trio.MemoryReceiveChannel[ChildEvent]) -> None:
    """A supervisor's reports nobody acts on: each child's exits and restarts are logged where they happen."""
    async for _ in reports:
        pass
