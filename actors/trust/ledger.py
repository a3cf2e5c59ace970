"""The ledger: which definitions each backend may show, judged against the approved baselines by its
trust mode. Owned by the catalog actor (it judges each list as it comes); the store behind it is written by
the trust keeper from what `take_writes` hands over, and what the store says back is `merge`d in.

For each listed definition of a backend whose mode is not off:
- its digest equals the approved one: shown;
- pin: first seen (no baseline of its name): trusted and pinned, unless its body is that of a definition
  of the backend that vanished or is held (a rename: held as RENAMED, so a changed tool cannot be
  laundered through a new name); a different digest: held as CHANGED;
- manual: as pin, but a definition never approved is held as NEW;
- scan: pinned when the scan finds nothing (a change too: the baseline moves on, logged as accepted),
  held as FINDINGS when it finds something;
- the baselines of its backend are not loaded yet (the store has not answered): held as UNKNOWN, with no
  record (fail closed).

Bounds: at most MAX_BASELINES_PER_BACKEND baselines (past it, new definitions are held as FULL: nothing is
evicted, or a backend could push an approved name out and bring it back changed), at most
MAX_HELD_PER_BACKEND held records (past it, more are hidden without one), one held record per
definition however often the backend changes it, and at most MAX_EVENTS_PER_HELD events per definition
between two decisions. A fingerprint is computed once per definition change: the last MEMO_PER_NAME forms
of each listed name are remembered (a backend flapping between two forms costs nothing more), and the
forms of names no longer listed are forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from loguru import logger

from actors.trust.definitions import KEY_FIELD, DefinitionKey, Fingerprint, Kind, fingerprint
from actors.trust.modes import HoldReason, TrustMode
from actors.trust.records import Baseline, Held, TrustEvent

MAX_BASELINES_PER_BACKEND: Final = 10_000  # 50x a large server's tools, prompts and templates
MAX_HELD_PER_BACKEND: Final = 256  # records to review per backend; each keeps up to 64 KiB of text
MAX_EVENTS_PER_HELD: Final = 8  # events of one definition between two decisions (a flapping one: no more)
MEMO_PER_NAME: Final = 2  # forms of one name remembered: the approved one and the one it flaps to
FIRST_SIGHT: Final = "first sight"
GATEWAY: Final = "gateway"

Slot = tuple[Kind, str]


@attrs.frozen
class Writes:
    """What the store should keep since the last take: new baselines (with their text), held records (the
    latest of each), and events."""

    pins: Mapping[DefinitionKey, tuple[Baseline, str]]
    holds: Mapping[DefinitionKey, Held]
    events: tuple[TrustEvent, ...]


@attrs.define
class Ledger:
    loaded: set[str] = attrs.field(factory=set)  # backends whose baselines the store has given
    _baselines: dict[str, dict[Slot, Baseline]] = attrs.field(factory=dict)
    _held: dict[str, dict[Slot, Held]] = attrs.field(factory=dict)
    _memo: dict[str, dict[Slot, list[tuple[Mapping[str, Any], Fingerprint]]]] = attrs.field(factory=dict)
    _events_of: dict[DefinitionKey, int] = attrs.field(factory=dict)  # since its last decision
    _pins: dict[DefinitionKey, tuple[Baseline, str]] = attrs.field(factory=dict)
    _holds: dict[DefinitionKey, Held] = attrs.field(factory=dict)
    _events: list[TrustEvent] = attrs.field(factory=list)
    _overflowed: set[str] = attrs.field(factory=set)  # backends past a cap: warned once

    def judge(
        self, backend: str, mode: TrustMode, kind: Kind, items: Sequence[Mapping[str, Any]]
    ) -> dict[str, str]:
        """The listed definitions of `kind` held from clients: own name -> why (in a few words)."""
        if mode is TrustMode.OFF:
            self._forget_kind(backend, kind, ())
            return {}
        listed = self._fingerprints(backend, kind, items)
        if backend not in self.loaded:
            return dict.fromkeys(listed, HoldReason.UNKNOWN.says())
        now = time.time()
        bases = self._baselines.setdefault(backend, {})
        helds = self._held.setdefault(backend, {})
        gone = {b.body: n for (k, n), b in bases.items() if k == kind and n not in listed}
        held_bodies = {h.body: n for (k, n), h in helds.items() if k == kind}
        held: dict[str, str] = {}
        for name, print_ in listed.items():
            base = bases.get((kind, name))
            if base is not None and base.digest == print_.digest:
                continue
            key = DefinitionKey(backend, kind, name)
            renamed = gone.get(print_.body) or held_bodies.get(print_.body)
            renamed = renamed if renamed != name else None
            if mode is TrustMode.SCAN:
                reason = HoldReason.FINDINGS if print_.findings else None
            elif base is not None:
                reason = HoldReason.CHANGED
            elif renamed is not None:
                reason = HoldReason.RENAMED
            else:
                reason = HoldReason.NEW if mode is TrustMode.MANUAL else None
            if reason is None and not self._pin(key, print_, base, now):
                reason = HoldReason.FULL
            if reason is not None:
                record = self._hold(
                    key, print_, reason, base, renamed if reason is HoldReason.RENAMED else None
                )
                held[name] = record.why if record is not None else reason.says(renamed)
        return held

    def _fingerprints(
        self, backend: str, kind: Kind, items: Sequence[Mapping[str, Any]]
    ) -> dict[str, Fingerprint]:
        """Each listed name's fingerprint (the first of a name repeated), computed only for a new form."""
        memo = self._memo.setdefault(backend, {})
        field = KEY_FIELD[kind]
        listed: dict[str, Fingerprint] = {}
        for item in items:
            name = item.get(field)
            if not isinstance(name, str) or name in listed:
                continue
            forms = memo.setdefault((kind, name), [])
            known = next((p for form, p in forms if form is item or form == item), None)
            if known is None:
                known = fingerprint(kind, item)
                forms.insert(0, (item, known))
                del forms[MEMO_PER_NAME:]
            listed[name] = known
        self._forget_kind(backend, kind, listed)
        return listed

    def _forget_kind(self, backend: str, kind: Kind, listed: Mapping[str, Any] | Sequence[str]) -> None:
        """The remembered forms of `kind` of names no longer listed are let go."""
        memo = self._memo.get(backend)
        if memo:
            for slot in [slot for slot in memo if slot[0] == kind and slot[1] not in listed]:
                del memo[slot]

    def _pin(self, key: DefinitionKey, print_: Fingerprint, base: Baseline | None, now: float) -> bool:
        """Trusted as it is now (first sight, or a change the scan found nothing in); False when the
        backend has no room for another baseline."""
        bases = self._baselines[key.backend]
        if base is None and len(bases) >= MAX_BASELINES_PER_BACKEND:
            self._warn_full(key.backend, f"{MAX_BASELINES_PER_BACKEND} pinned definitions")
            return False
        baseline = Baseline(print_.digest, print_.body, now, FIRST_SIGHT if base is None else GATEWAY)
        bases[(key.kind, key.name)] = baseline
        self._pins[key] = (baseline, print_.text())
        held = self._held[key.backend].get((key.kind, key.name))
        if held is not None and held.digest == print_.digest:
            del self._held[key.backend][(key.kind, key.name)]
        found = _summary(print_)
        if found:
            logger.bind(backend=key.backend).warning(
                "trust: {} {!r} pinned as first seen, but its scan found {}", key.kind, key.name, found
            )
        self._event(key, "pinned" if base is None else "accepted", base, print_.digest, found)
        return True

    def _hold(
        self,
        key: DefinitionKey,
        print_: Fingerprint,
        reason: HoldReason,
        base: Baseline | None,
        renamed: str | None,
    ) -> Held | None:
        """The held record of this form (the one there already when it is the same: nothing written)."""
        helds = self._held[key.backend]
        slot = (key.kind, key.name)
        existing = helds.get(slot)
        if existing is not None and existing.digest == print_.digest:
            return existing
        if existing is None and len(helds) >= MAX_HELD_PER_BACKEND:
            self._warn_full(key.backend, f"{MAX_HELD_PER_BACKEND} held definitions")
            return None
        now = time.time()
        held = Held(
            key=key,
            digest=print_.digest,
            body=print_.body,
            reason=reason,
            findings=print_.findings,
            text=print_.text(),
            approved=base.digest if base is not None else None,
            renamed_from=renamed,
            first_seen=existing.first_seen if existing is not None else now,
            last_seen=now,
            changes=existing.changes + 1 if existing is not None else 1,
        )
        if self._event(key, "held", base, print_.digest, f"{reason.value}; {_summary(print_)}"):
            logger.bind(backend=key.backend).warning(  # as bounded as the events
                "trust: {} {!r} held for review: {} (digest {})",
                key.kind,
                key.name,
                held.why,
                held.digest[:12],
            )
        helds[slot] = held = attrs.evolve(held, events=self._events_of.get(key, 0))
        self._holds[key] = held
        return held

    def _event(self, key: DefinitionKey, event: str, base: Baseline | None, digest: str, detail: str) -> bool:
        """An event of the gateway's, unless this definition had its MAX_EVENTS_PER_HELD since its last
        decision (a backend flapping a definition leaves a bounded trail)."""
        count = self._events_of.get(key, 0)
        if count >= MAX_EVENTS_PER_HELD:
            return False
        self._events_of[key] = count + 1
        old = base.digest if base is not None else None
        self._events.append(TrustEvent(time.time(), key, event, GATEWAY, old, digest, detail.strip("; ")))
        return True

    def _warn_full(self, backend: str, what: str) -> None:
        if backend not in self._overflowed:
            self._overflowed.add(backend)
            logger.bind(backend=backend).warning("trust: the backend has {}; more are hidden", what)

    def take_writes(self) -> Writes | None:
        """What changed since the last take, for the store; None when nothing did."""
        if not (self._pins or self._holds or self._events):
            return None
        writes = Writes(self._pins, self._holds, tuple(self._events))
        self._pins, self._holds, self._events = {}, {}, []
        return writes

    def merge(self, backend: str, baselines: Mapping[Slot, Baseline], held: Mapping[Slot, Held]) -> None:
        """What the store holds of `backend` (loaded at start, or after another replica wrote it): its
        baselines and held records replace these names' own; a held record its baseline now approves is
        let go."""
        self.loaded.add(backend)
        bases = self._baselines.setdefault(backend, {})
        bases.update(baselines)
        helds = self._held.setdefault(backend, {})
        helds.update(held)
        for slot, record in list(helds.items()):
            base = bases.get(slot)
            if base is not None and base.digest == record.digest:
                del helds[slot]

    def decide(self, key: DefinitionKey, digest: str, approved: Baseline | None, by: str) -> None:
        """An operator's decision, once the store has it: `approved` becomes the baseline, or the held
        record of `digest` is marked rejected (and stays hidden)."""
        slot = (key.kind, key.name)
        helds = self._held.setdefault(key.backend, {})
        held = helds.get(slot)
        if approved is not None:
            self._baselines.setdefault(key.backend, {})[slot] = approved
            if held is not None and held.digest == approved.digest:
                del helds[slot]
        elif held is not None and held.digest == digest:
            helds[slot] = attrs.evolve(held, rejected_by=by)
        self._events_of.pop(key, None)

    def forget(self, backend: str) -> None:
        """A backend no longer configured: what is held of it here is let go (the store keeps it)."""
        self.loaded.discard(backend)
        for table in (self._baselines, self._held, self._memo):
            table.pop(backend, None)
        self._overflowed.discard(backend)
        for key in [key for key in self._events_of if key.backend == backend]:
            del self._events_of[key]

    def held(self) -> tuple[Held, ...]:
        """Every held record, by backend, kind and name."""
        return tuple(
            sorted((h for helds in self._held.values() for h in helds.values()), key=lambda h: h.key)
        )

    def baseline(self, key: DefinitionKey) -> Baseline | None:
        return self._baselines.get(key.backend, {}).get((key.kind, key.name))


def _summary(print_: Fingerprint) -> str:
    """The scan's findings in a few words: "2 findings: hidden, instruction"."""
    if not print_.findings:
        return ""
    kinds = sorted({finding.kind for finding in print_.findings})
    count = len(print_.findings)
    return f"{count} finding{'' if count == 1 else 's'}: {', '.join(kinds)}"
