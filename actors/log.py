"""Logging: loguru to stderr (or a file), never stdout, with the actor's name on every line.

`logger.contextualize(backend=...)` / `(session=...)` at the top of an actor's `run` puts its name on every
line it and its child tasks log.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import trio
from loguru import logger

FORMAT: Final = "{time:YYYY-MM-DD HH:mm:ss.SSS} {level: <7} {extra[where]}{message}"
CONTEXT_KEYS: Final = ("backend", "session", "subject", "child")


def _where(record: Any) -> None:
    extra = record["extra"]
    parts = [f"{key}={extra[key]}" for key in CONTEXT_KEYS if key in extra]
    if "child" in extra and "backend" in extra:
        parts.remove(f"child={extra['child']}")
    extra["where"] = f"[{' '.join(parts)}] " if parts else ""


def configure_logging(level: str = "INFO", file: str | None = None) -> None:
    """Send every log line to stderr (and to `file` when given). stdout stays protocol-only."""
    logger.remove()
    logger.configure(patcher=_where)
    logger.add(sys.stderr, level=level.upper(), format=FORMAT, backtrace=False, diagnose=False)
    if file:
        logger.add(file, level=level.upper(), format=FORMAT, rotation="50 MB", retention=5, enqueue=False)


class RateLimiter:
    """A token bucket for log lines: `rate_per_s` sustained, bursts up to `burst`; counts what it refuses."""

    def __init__(self, rate_per_s: float, burst: float | None = None) -> None:
        self._rate = rate_per_s
        self._burst = burst if burst is not None else rate_per_s * 2
        self._tokens = self._burst
        self._stamp = trio.current_time()
        self.suppressed = 0

    def allow(self) -> bool:
        now = trio.current_time()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            self.suppressed = 0
            return True
        self.suppressed += 1
        return False
