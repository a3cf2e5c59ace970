"""How far the gateway trusts what a backend advertises ([trust] mode, [[backends]] trust)."""

from __future__ import annotations

import enum


class TrustMode(enum.StrEnum):
    OFF = "off"  # nothing pinned, nothing computed: every definition is shown as the backend lists it
    PIN = "pin"  # the first definition seen is trusted (pinned); every later change is held for review
    SCAN = "scan"  # every definition is scanned; only those with findings are held
    MANUAL = "manual"  # every new or changed definition is held until an operator approves it


class HoldReason(enum.StrEnum):
    """Why a definition is held: what clients' errors and the operator's list say."""

    CHANGED = "changed"  # it differs from the approved one of the same name
    NEW = "new"  # never approved, and the backend's trust is manual
    RENAMED = "renamed"  # a new name with the body of a definition that vanished or is held
    FINDINGS = "findings"  # the scan found something (trust = "scan")
    FULL = "full"  # the backend has as many pinned definitions as it may
    UNKNOWN = "unknown"  # the baselines are not loaded (their store has not answered yet)

    def says(self, renamed_from: str | None = None) -> str:
        """Why, in a few words, after "held: "."""
        return {
            HoldReason.CHANGED: "its definition changed since it was approved",
            HoldReason.NEW: "it is new and its backend's trust is manual",
            HoldReason.RENAMED: f"it came back under a new name with the body of {renamed_from!r}",
            HoldReason.FINDINGS: "the scan of its definition found something to review",
            HoldReason.FULL: "its backend has as many pinned definitions as it may",
            HoldReason.UNKNOWN: "the approved definitions are not loaded yet (their store has not answered)",
        }[self]
