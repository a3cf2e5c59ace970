"""The gateway's signals, heard for its whole life, its shutdown included (nothing MCP here).

SIGINT and SIGTERM begin the shutdown with the whole `shutdown_s`; during a shutdown (whoever began it: a
signal, or the stdio client closing its input) the next one hurries it and the one after forces it
(runtime/shutdown.py). SIGHUP reloads the config while the gateway runs and is let be during a shutdown.
Python's default action (death on the spot, backends left running) never applies while this runs.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Final

import trio
from loguru import logger

from actors.runtime.shutdown import Budget, Shutdown, Urgency

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def watch_signals(
    shutdown: Shutdown,
    shutdown_s: float,
    on_hangup: Callable[[], object],
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Shielded from its nursery's cancellation: `started()` hands back the scope that alone ends it, to be
    cancelled once there is nothing left for a signal to hurry."""
    with trio.CancelScope(shield=True) as scope, trio.open_signal_receiver(*SIGNALS) as signals:
        task_status.started(scope)
        async for signum in signals:
            heard(signal.Signals(signum), shutdown, shutdown_s, on_hangup)


def heard(
    signum: signal.Signals, shutdown: Shutdown, shutdown_s: float, on_hangup: Callable[[], object]
) -> None:
    name = signum.name
    if signum == signal.SIGHUP:
        if shutdown.begun:
            logger.info("SIGHUP during the shutdown: no reload")
        else:
            on_hangup()
    elif shutdown.begin(name, Budget.of(shutdown_s)):
        logger.info("{}: shutting down (at most {}s)", name, shutdown_s)
    elif shutdown.hurry() is Urgency.HURRIED:
        logger.warning("{} during the shutdown: backends still running get SIGTERM now", name)
    else:
        logger.warning("{} again: backends still running get SIGKILL now", name)
