"""Watching a file for changes without inotify: its size and modification time, polled.

A change is acted on once it has held still for one more poll, so an editor that writes a file in several
steps (or replaces it) triggers one reload of the finished file, not one per step.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import trio

POLL_S: Final = 1.0


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None  # gone for a moment (an editor's rename): its return is the change
    return stat.st_mtime_ns, stat.st_size


async def watch_file(path: Path, on_change: Callable[[], Awaitable[object]], poll_s: float = POLL_S) -> None:
    """Call `on_change` each time the file changed and then held still for `poll_s`; until cancelled."""
    seen = _stamp(path)
    while True:
        await trio.sleep(poll_s)
        now = _stamp(path)
        if now == seen or now is None:
            continue
        await trio.sleep(poll_s)
        if _stamp(path) != now:
            continue  # still being written: the next poll sees where it ends
        seen = now
        await on_change()
