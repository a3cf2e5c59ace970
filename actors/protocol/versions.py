"""Protocol facts the gateway relies on (MCP specification)."""

from __future__ import annotations

from typing import Final

LATEST_VERSION: Final = "2025-11-25"
SUPPORTED_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# notifications/message and logging/setLevel levels, least severe first (RFC 5424 syslog severities)
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def negotiate_version(requested: object) -> str:
    """Echo a version we support; otherwise the newest we support (the client decides whether to stay)."""
    return requested if isinstance(requested, str) and requested in SUPPORTED_VERSIONS else LATEST_VERSION
