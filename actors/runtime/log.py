"""Logging: loguru to stderr (or a file), never stdout, with the actor's name on every line.

Two formats: text (the default), or JSON (`--log-format json`) for log shippers: one object per line with
`time`, `level`, `message`, the context keys present (`backend`, `session`, `subject`, `child`), `logger`,
and `exception` (the traceback as one string) when there is one.

`logger.contextualize(backend=...)` / `(session=...)` at the top of an actor's `run` puts its name on every
line it and its child tasks log.

Every line is one line: the patcher escapes control characters in the message and in the context shown in
`[..]`, whoever chose the text (a request path, a clientInfo, a backend's log data or stderr), so no peer
can forge log lines or send escape sequences to the operator's terminal. No message of the gateway's own
needs a newline; a traceback (`logger.opt(exception=...)`) follows the escaped message and keeps its
lines. A JSON line carries the same escaped text, and no raw control character at all: JSON escapes C0
itself, `escape_json_controls` the rest, so each line stays one valid JSON object.

Every line is redacted (runtime/redact.py) before it is written, whatever the sink: the message and the
context, by the patcher, once per record; a traceback as it is formatted (an exception's text may quote a
URL with its password, a header, a backend's words). A secret's value never reaches the log's file or
stderr, in either format.
"""

from __future__ import annotations

import re
import sys
import traceback
from typing import Any, Final

import orjson
import trio
from loguru import logger

from actors.runtime.redact import redact

FORMAT: Final = "{time:YYYY-MM-DD HH:mm:ss.SSS} {level: <7} {extra[where]}{message}"
CONTEXT_KEYS: Final = ("backend", "session", "subject", "child")
LOG_FORMATS: Final = ("text", "json")
LOG_LEVELS: Final = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")  # loguru's own
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
    """The loguru patcher: redact and escape the message and compute `[..]`, the line's context, redacted
    and escaped too."""
    record["message"] = escape_controls(redact(record["message"]))
    extra = record["extra"]
    keys = [key for key in CONTEXT_KEYS if key in extra and not (key == "child" and "backend" in extra)]
    parts = [f"{key}={_context(extra[key])}" for key in keys]
    extra["where"] = f"[{' '.join(parts)}] " if parts else ""


def _context(value: object) -> str:
    return escape_controls(redact(str(value)))


def _traceback(error: Any) -> str:
    """A record's exception as the standard library writes it, redacted."""
    return redact("".join(traceback.format_exception(error.type, error.value, error.traceback))).rstrip("\n")


def _text_format(record: Any) -> str:
    """loguru's format for text lines: FORMAT, and the traceback (redacted) when the record has one."""
    error = record["exception"]
    if error is None or error.type is None:
        return FORMAT + "\n"
    record["extra"]["traceback"] = _traceback(error)
    return FORMAT + "\n{extra[traceback]}\n"


def json_fields(record: Any) -> dict[str, Any]:
    """What a JSON log line says: the record after `_patch`, so the message is already escaped."""
    extra = record["extra"]
    fields: dict[str, Any] = {
        "time": record["time"].isoformat(timespec="milliseconds"),
        "level": record["level"].name,
        "message": record["message"],
    }
    fields.update((key, _context(extra[key])) for key in CONTEXT_KEYS if key in extra)
    fields["logger"] = record["name"]
    error = record["exception"]
    if error is not None and error.type is not None:
        # One string keeping its line breaks (a JSON string holds them escaped); every other control
        # character is escaped, \r and U+2028 included (not splitlines, which would break on them).
        fields["exception"] = "\n".join(map(escape_controls, _traceback(error).split("\n")))
    return fields


def _dump(fields: dict[str, Any]) -> str:
    try:
        text = orjson.dumps(fields).decode()
    except TypeError:  # a lone surrogate (orjson refuses them): written as the text \udcff instead
        clean = {
            k: v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v
            for k, v in fields.items()
        }
        text = orjson.dumps(clean).decode()
    return escape_json_controls(text)


def _json_format(record: Any) -> str:
    """loguru's format for --log-format json. A format function returns a template, not the line, so the
    line goes into `extra` and the template names it; loguru adds no traceback of its own to it."""
    record["extra"]["json"] = _dump(json_fields(record))
    return "{extra[json]}\n"


def configure_logging(level: str = "INFO", file: str | None = None, log_format: str = "text") -> None:
    """Send every log line to stderr (and to `file` when given), as text or as JSON lines (`log_format`).
    stdout stays protocol-only."""
    global _json_lines
    _json_lines = log_format == "json"
    form = _json_format if _json_lines else _text_format
    logger.remove()
    logger.configure(patcher=_patch)
    logger.add(sys.stderr, level=level.upper(), format=form, colorize=False, backtrace=False, diagnose=False)
    if file:
        logger.add(file, level=level.upper(), format=form, rotation="50 MB", retention=5, enqueue=False)


_json_lines = False  # set by configure_logging: `report` then writes a log line, not plain text


def report(line: str, level: str = "ERROR") -> None:
    """A one-line message for the operator on stderr (a config problem, a start failure): plain text, or a
    log line of `level` when the log is JSON, so a shipper reading stderr sees it too."""
    if _json_lines:
        logger.opt(depth=1).log(level, "{}", line)
    else:
        print(redact(str(line)), file=sys.stderr)


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
