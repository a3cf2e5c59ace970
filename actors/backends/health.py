"""A backend's health pings ([backends.health]): a server that stops answering them is hung."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import trio
from loguru import logger

from actors.backends.connection import BackendRequestError
from actors.backends.errors import BackendHungError

if TYPE_CHECKING:
    from actors.backends.connection import BackendLink
    from actors.config import HealthConfig


async def watch_health(link: BackendLink, health: HealthConfig, method: str = "ping") -> None:
    """Ping every interval_s (`method`: server/discover for a modern backend, which has no ping);
    `failures` unanswered pings in a row end the run as hung. Any answer, even an error (a server without
    ping), shows the backend is alive."""
    misses = 0
    while True:
        await trio.sleep(health.interval_s)
        with trio.move_on_after(health.timeout_s) as deadline:
            with contextlib.suppress(BackendRequestError):
                await link.request(method)
        if not deadline.cancelled_caught:
            misses = 0
            continue
        misses += 1
        logger.warning(
            "no answer to a health ping within {}s ({} of {})", health.timeout_s, misses, health.failures
        )
        if misses >= health.failures:
            link.lose(
                BackendHungError(
                    f"hung: {misses} health pings in a row unanswered within {health.timeout_s}s"
                )
            )
            return
