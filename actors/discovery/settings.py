"""[discovery]: how the gateway's tools are exposed: every definition (direct), pins and three tools
(search), or search once the listing would cost more than `threshold_tokens` (auto).

Gateway-wide for now; a route applies the same settings to its own exposure (exposure.py)."""

from __future__ import annotations

import enum
from typing import Any, Final

import attrs

MAX_PINS: Final = 64  # pins are always listed: past a few dozen, search mode is pointless
MAX_PIN_CHARS: Final = 256
MAX_THRESHOLD_TOKENS: Final = 10_000_000  # past any model's context: a bigger number is a typo


class DiscoveryMode(enum.StrEnum):
    DIRECT = "direct"  # every tool listed (the default: nothing changes)
    SEARCH = "search"  # pins + search_tools, get_tool_schema, call_tool
    AUTO = "auto"  # search once the direct listing's estimate passes threshold_tokens (never by clientInfo)


def _threshold(_instance: Any, _attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not 1 <= value <= MAX_THRESHOLD_TOKENS:
        raise ValueError(f"must be from 1 to {MAX_THRESHOLD_TOKENS} tokens")


def _pins(_instance: Any, _attribute: Any, value: tuple[str, ...]) -> None:
    if len(value) > MAX_PINS:
        raise ValueError(f"at most {MAX_PINS} pinned tools")
    for name in value:
        if (
            not name.strip()
            or len(name) > MAX_PIN_CHARS
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
        ):
            raise ValueError(
                f"{name[:40]!r} is not a tool name (1 to {MAX_PIN_CHARS} characters, no control characters)"
            )


@attrs.frozen(kw_only=True)
class DiscoverySettings:
    """[discovery]."""

    mode: DiscoveryMode = DiscoveryMode.DIRECT
    # auto: the listing's estimated tokens (compact JSON characters / 4) past which search mode is used
    threshold_tokens: int = attrs.field(default=8000, validator=_threshold)
    pin: tuple[str, ...] = attrs.field(default=(), validator=_pins)  # public names always listed
