"""What changed in a held definition, as a reviewer reads it: a unified diff of the approved text and the
held one (both as definitions.reviewable writes them: indented JSON, sorted keys, hidden characters
written out), bounded in lines."""

from __future__ import annotations

import difflib
from typing import Final

MAX_DIFF_LINES: Final = 2000
CONTEXT_LINES: Final = 3


def unified(approved: str | None, held: str, name: str) -> str:
    """The diff from the approved text (None: nothing approved under this name, so all of it is new)."""
    before = (approved or "").splitlines()
    lines = list(
        difflib.unified_diff(
            before,
            held.splitlines(),
            fromfile=f"{name} (approved)" if approved is not None else "(nothing approved)",
            tofile=f"{name} (held)",
            n=CONTEXT_LINES,
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more lines)"]
    return "\n".join(lines)
