"""What the trust store keeps: each approved definition's baseline, each held definition, and the events
(first sight, held, accepted, approved, rejected), with their JSON forms for the stores.

Records read back from a store are checked field by field (`of`): a record that is not one is skipped, so
a damaged file or a foreign key in Redis cannot stop the gateway."""

from __future__ import annotations

from typing import Any, Final

import attrs

from actors.trust.definitions import KINDS, DefinitionKey, Kind
from actors.trust.modes import HoldReason
from actors.trust.scan import Finding

MAX_BY_CHARS: Final = 128  # of a reviewer's name as stored
MAX_DETAIL_CHARS: Final = 512
MAX_NAME_CHARS: Final = 4096  # of a definition's own name (a template's uriTemplate) as stored


def clean(value: object, limit: int) -> str:
    """A string as stored: cut to `limit` characters."""
    return str(value)[:limit]


@attrs.frozen(slots=True)
class Baseline:
    """The approved definition of a name: its digests, when it was approved, and by whom ("first sight"
    for one trusted as first seen)."""

    digest: str
    body: str
    at: float  # wall clock, seconds
    by: str

    def as_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "body": self.body, "at": self.at, "by": self.by}

    @classmethod
    def of(cls, raw: object) -> Baseline | None:
        if not isinstance(raw, dict):
            return None
        digest, body, at, by = (raw.get(name) for name in ("digest", "body", "at", "by"))
        if not (_hex(digest) and _hex(body) and _number(at) and isinstance(by, str)):
            return None
        return cls(str(digest), str(body), float(at), clean(by, MAX_BY_CHARS))  # type: ignore[arg-type]


@attrs.frozen(slots=True)
class Held:
    """A definition kept from clients until an operator decides: one per (backend, kind, name), replaced by
    the backend's next change of it (which counts `changes`), kept through restarts."""

    key: DefinitionKey
    digest: str
    body: str
    reason: HoldReason
    findings: tuple[Finding, ...]
    text: str  # what the reviewer reads (definitions.reviewable)
    approved: str | None  # the approved digest it differs from; None: nothing approved under its name
    renamed_from: str | None  # RENAMED: the name whose body it has
    first_seen: float
    last_seen: float
    changes: int = 1  # times the backend listed a new form of it while held
    rejected_by: str | None = None  # set once an operator rejected this digest (it stays hidden)
    events: int = 0  # events written of it since it was first held (at most MAX_EVENTS_PER_HELD)

    @property
    def why(self) -> str:
        return self.reason.says(self.renamed_from)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key.as_json(),
            "digest": self.digest,
            "body": self.body,
            "reason": self.reason.value,
            "findings": [finding.as_json() for finding in self.findings],
            "text": self.text,
            "approved": self.approved,
            "renamed_from": self.renamed_from,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "changes": self.changes,
            "rejected_by": self.rejected_by,
            "events": self.events,
        }

    @classmethod
    def of(cls, raw: object) -> Held | None:
        if not isinstance(raw, dict):
            return None
        key = key_of(raw.get("key"))
        digest, body, reason = raw.get("digest"), raw.get("body"), raw.get("reason")
        findings = raw.get("findings")
        if key is None or not (_hex(digest) and _hex(body)) or reason not in set(HoldReason):
            return None
        if not isinstance(findings, list) or not isinstance(raw.get("text"), str):
            return None
        approved, renamed, rejected = raw.get("approved"), raw.get("renamed_from"), raw.get("rejected_by")
        first, last = raw.get("first_seen"), raw.get("last_seen")
        changes, events = raw.get("changes"), raw.get("events", 0)
        if approved is not None and not _hex(approved):
            return None
        if not (_number(first) and _number(last) and _count(changes) and _count(events)):
            return None
        return cls(
            key=key,
            digest=str(digest),
            body=str(body),
            reason=HoldReason(reason),
            findings=tuple(f for f in map(Finding.of, findings) if f is not None),
            text=str(raw["text"]),
            approved=approved,  # type: ignore[arg-type]
            renamed_from=clean(renamed, MAX_NAME_CHARS) if isinstance(renamed, str) else None,
            first_seen=float(first),  # type: ignore[arg-type]
            last_seen=float(last),  # type: ignore[arg-type]
            changes=int(changes),  # type: ignore[arg-type]
            rejected_by=clean(rejected, MAX_BY_CHARS) if isinstance(rejected, str) else None,
            events=int(events),  # type: ignore[arg-type]
        )


@attrs.frozen(slots=True)
class TrustEvent:
    """One line of the trust log: what happened to a definition, who did it, and both digests."""

    at: float
    key: DefinitionKey
    event: str  # pinned, held, accepted (trust = "scan"), approved, rejected
    by: str  # a reviewer, or "gateway" for what the gateway decided by its mode
    old: str | None  # the approved digest before
    new: str | None  # the digest it is about
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            **self.key.as_json(),
            "event": self.event,
            "by": self.by,
            "old": self.old,
            "new": self.new,
            "detail": self.detail,
        }


def key_of(raw: object) -> DefinitionKey | None:
    if not isinstance(raw, dict):
        return None
    backend, kind, name = raw.get("backend"), raw.get("kind"), raw.get("name")
    if not isinstance(backend, str) or kind not in KINDS or not isinstance(name, str):
        return None
    kind_: Kind = kind  # type: ignore[assignment]
    return DefinitionKey(backend, kind_, name)


def _hex(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
