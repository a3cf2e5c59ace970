"""Names as the audit stores them, in either table: redacted (runtime/redact.py) in one pass, control
characters escaped, cut to a whole character at most NAME_BYTES long: a name, not a payload."""

from __future__ import annotations

from typing import Final

from actors.runtime.log import escape_controls
from actors.runtime.redact import REDACTOR

NAME_BYTES: Final = 256  # session, subject, client, backend and tool names as stored: a name, not a payload


def prefix(data: bytes, limit: int) -> str:
    """The longest whole-character UTF-8 prefix of `data` of at most `limit` bytes."""
    return data[:limit].decode("utf-8", "ignore")


def cap_name(value: object, limit: int = NAME_BYTES) -> tuple[str | None, bool]:
    """A name as stored: control characters escaped, at most `limit` bytes; and whether it was cut. The
    caller has redacted it (`redacted_names`)."""
    if value is None:
        return None, False
    raw = str(value).encode("utf-8", "backslashreplace")
    text = escape_controls(prefix(raw, limit))
    stored = prefix(text.encode(), limit)
    return stored, len(raw) > limit or len(stored) < len(text)


def redacted_names(*values: object) -> list[str | None]:
    """Names as the audit stores them, redacted (runtime/redact.py) in one pass; None stays None."""
    texts = [str(value) for value in values if value is not None]
    clean = iter(REDACTOR.redact_all(texts))
    return [None if value is None else next(clean) for value in values]
