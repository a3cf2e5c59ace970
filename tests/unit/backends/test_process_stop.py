"""A backend process stopped during a shutdown that a signal hurries: the polite wait ends at once (SIGTERM
now), and a second hurry ends the SIGTERM wait too (SIGKILL now). Real processes, the waits long enough that
only the hurry can end them in time."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Final

import pytest
import trio
import trio.testing

from actors.backends.process import ProcessTransport
from actors.runtime.shutdown import Budget, Shutdown

LONG_S: Final = 60.0  # each wait: a stop that is not hurried would fail the deadline
DEADLINE_S: Final = 10.0
# Ignores the end of its stdin (never reads it); says "ready" once its SIGTERM disposition is set.
SERVER: Final = (
    "import signal, sys, time\n"
    "if sys.argv[1] == 'ignore': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(3600)\n"
)


async def started(sigterm: str, shutdown: Shutdown) -> ProcessTransport:
    transport = await ProcessTransport.spawn(
        [sys.executable, "-c", SERVER, sigterm], cwd=Path.cwd(), env={}, max_bytes=1 << 20, shutdown=shutdown
    )
    assert await transport.receive() == b"ready"
    return transport


async def stop_hurried(transport: ProcessTransport, shutdown: Shutdown, hurries: int) -> float:
    began = trio.current_time()
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: transport.stop(close_wait_s=LONG_S, term_wait_s=LONG_S))
            for _ in range(hurries):
                await trio.testing.wait_all_tasks_blocked()  # in the next wait of stop()
                shutdown.hurry()
    return trio.current_time() - began


@pytest.mark.parametrize(
    ("sigterm", "hurries", "ended_by"),
    [("default", 1, signal.SIGTERM), ("ignore", 2, signal.SIGKILL)],
    ids=["hurried: SIGTERM without the polite wait", "forced: SIGKILL without the SIGTERM wait"],
)
async def test_each_hurry_of_the_shutdown_skips_one_wait_of_a_stop(
    sigterm: str, hurries: int, ended_by: signal.Signals
) -> None:
    shutdown = Shutdown()
    shutdown.begin("the stdio client is gone", Budget.of(4 * LONG_S))
    transport = await started(sigterm, shutdown)
    assert await stop_hurried(transport, shutdown, hurries=hurries) < LONG_S
    assert transport.process.returncode == -ended_by
