"""Where baselines, held definitions and the trust log are kept: the interface both stores give the trust
keeper (catalog/trust_keeper.py). SQLite beside the audit by default (sqlite_store.py); Redis with [fleet]
(fleet/trust_store.py), so that a change one replica sees is held on all and an approval on one serves all.

A first-sight pin is written only where none is (the first writer wins: two gateways sharing a store that
first saw two forms of a name agree on one); what a store already had instead is handed back, and the
ledger then holds the other form. A decision is refused when the held form is no longer the one the
operator reviewed (`DecisionRefusedError`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol

import attrs

from actors.trust.definitions import DefinitionKey, Kind
from actors.trust.ledger import Writes
from actors.trust.records import Baseline, Held, TrustEvent

MAX_EVENTS: Final = 10_000  # the trust log keeps the newest this many events
Slot = tuple[Kind, str]


@attrs.frozen
class BackendTrust:
    """What a store holds of one backend."""

    baselines: Mapping[Slot, Baseline] = attrs.field(factory=dict)
    held: Mapping[Slot, Held] = attrs.field(factory=dict)


@attrs.frozen
class Decision:
    """An operator's decision on a held definition: approve it (it becomes the baseline) or reject it (it
    stays hidden, marked), named by the digest the operator reviewed."""

    key: DefinitionKey
    digest: str
    approve: bool
    by: str
    held: Held  # the record decided on: its text becomes the baseline's
    at: float

    def baseline(self) -> Baseline:
        return Baseline(self.held.digest, self.held.body, self.at, self.by)

    def event(self) -> TrustEvent:
        word = "approved" if self.approve else "rejected"
        held = self.held
        return TrustEvent(self.at, self.key, word, self.by, held.approved, self.digest, held.reason.value)


class TrustStoreUnavailableError(Exception):
    """The store cannot be read or written now (its file, or Redis); the keeper tries again."""


class DecisionRefusedError(Exception):
    """The decision does not apply: the held definition changed since it was reviewed."""


class TrustStore(Protocol):
    @property
    def shown(self) -> str:
        """Where it is, for the log."""
        ...

    async def open(self) -> None: ...

    async def load(self, backends: Sequence[str]) -> dict[str, BackendTrust]:
        """What the store holds of these backends (each one named, found or not)."""
        ...

    async def write(self, writes: Writes) -> dict[str, BackendTrust]:
        """Keep the pins, held records and events; hand back, by backend, the baselines a first-sight pin
        found there already with another digest."""
        ...

    async def decide(self, decision: Decision) -> None:
        """Apply an operator's decision, with its event; DecisionRefusedError when the stored held record
        has another digest now."""
        ...

    async def text_of(self, key: DefinitionKey) -> str | None:
        """The reviewable text of the approved definition of `key`, if any."""
        ...

    async def events(self, limit: int) -> list[TrustEvent]:
        """The newest events, newest first."""
        ...

    async def close(self) -> None: ...
