"""Logging: loguru to stderr (or a file), never stdout, with the actor's name on every line.

`logger.contextualize(backend=...)` / `(session=...)` at the top of an actor's `run` puts its name on every
line it and its child tasks log.

Every line is one line: the patcher escapes control characters in the message and in the context shown in
`[..]`, whoever chose the text (a request path, a clientInfo, a backend's log data or stderr), so no peer
can forge log lines or send escape sequences to the operator's terminal. No message of the gateway's own
needs a newline; a traceback (`logger.opt(exception=...)`) is added by loguru after the escaped message
and keeps its lines.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Final

import trio
from loguru import logger

FORMAT: Final = "{time:YYYY-MM-DD HH:mm:ss.SSS} {level: <7} {extra[where]}{message}"
CONTEXT_KEYS: Final = ("backend", "session", "subject", "child")
# C0, DEL and C1 (NEL included); the Unicode line and paragraph separators; the bidirectional overrides and
# isolates, which make a terminal show a line in another order than it was written.
CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _as_text(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _as_json(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_controls(text: str) -> str:
    """`text` with each control character written as \\xNN (or \\uNNNN above U+00FF): one printable line."""
    return text if CONTROLS.search(text) is None else CONTROLS.sub(_as_text, text)


def escape_json_controls(text: str) -> str:
    """JSON text with each control character inside its strings written as \\uNNNN: the same JSON value
    (JSON escapes C0 itself; DEL, C1 and the separators may stand raw in a JSON string)."""
    return text if CONTROLS.search(text) is None else CONTROLS.sub(_as_json, text)


def _patch(record: Any) -> None:
    """The loguru patcher: escape the message and compute `[..]`, the line's context, escaped too."""
    record["message"] = escape_controls(record["message"])
    extra = record["extra"]
    keys = [key for key in CONTEXT_KEYS if key in extra and not (key == "child" and "backend" in extra)]
    parts = [f"{key}={escape_controls(str(extra[key]))}" for key in keys]
    extra["where"] = f"[{' '.join(parts)}] " if parts else ""


def configure_logging(level: str = "INFO", file: str | None = None) -> None:
    """Send every log line to stderr (and to `file` when given). stdout stays protocol-only."""
    logger.remove()
    logger.configure(patcher=_patch)
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

    def log(self, level: str, message: str, *args: object) -> None:
        """Log `message` (a loguru template) if the budget allows, saying how many were held back since."""
        suppressed = self.suppressed
        if self.allow():
            more = f" ({suppressed} more not logged)" if suppressed else ""
            logger.opt(depth=1).log(level, message + "{}", *args, more)
