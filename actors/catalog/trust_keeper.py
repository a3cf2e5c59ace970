"""The trust keeper: the one owner of the trust store (trust/store.py). The catalog judges each list with its
ledger and hands over what to keep; the keeper writes it, and tells the catalog what the store says back
(baselines loaded, a pin another gateway won, another replica's decision, an operator's decision).

Writes are coalesced (the latest pin and held record of each definition, events up to MAX_PENDING_EVENTS)
and written by one task, so a backend flapping a definition costs the store a write per batch, not per
change. A store that does not answer keeps them until it does (tried again every RETRY_S), and a backend
whose baselines could not be loaded stays held as UNKNOWN until they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs
import trio
from loguru import logger

from actors.trust.definitions import DefinitionKey
from actors.trust.ledger import Writes
from actors.trust.records import Baseline, Held, TrustEvent
from actors.trust.store import (
    BackendTrust,
    Decision,
    DecisionRefusedError,
    TrustStore,
    TrustStoreUnavailableError,
)

MAX_PENDING_EVENTS: Final = 4096  # events waiting for the store; past it they are counted, not kept
RETRY_S: Final = 2.0  # a store that did not answer is tried again this often
DECIDE_WAIT_S: Final = 10.0  # an operator's decision waits this long for the store and the catalog
LOG_LIMIT: Final = 200  # events the admin listener shows at most


@attrs.frozen(slots=True)
class TrustLoaded:
    """Keeper -> Catalog: what the store holds of a backend (its baselines are known from now on)."""

    backend: str
    trust: BackendTrust = attrs.field(eq=False)


@attrs.frozen(slots=True)
class TrustDecided:
    """Keeper -> Catalog: an operator's decision, stored; `applied` is set once the catalog published it."""

    key: DefinitionKey
    digest: str
    approved: Baseline | None  # None: rejected
    by: str
    applied: trio.Event = attrs.field(eq=False, repr=False, factory=trio.Event)


TrustNews = TrustLoaded | TrustDecided


@attrs.define(eq=False, kw_only=True)
class TrustKeeper:
    """Owns: the trust store (opened at start when a backend's trust is on, else at its first use), the writes
    not yet stored, the backends waiting to be loaded.
    Receives: writes from the catalog (`note`), backends to load (`load_later`, `reloaded` for another
        replica's change), decisions and reads from the admin listener (`decide`, `events`, `text_of`).
    Sends: TrustLoaded and TrustDecided to the catalog's inbox; `on_written(backend)` after each write
        (the fleet tells the other replicas).
    Stops when: cancelled with the gateway's root; what is noted is written first, within FLUSH_S.
    Errors: none escape; a store that fails is logged and tried again.
    """

    store: TrustStore
    catalog: trio.MemorySendChannel[TrustNews]
    on_written: Callable[[str], None] | None = None
    flush_s: float = 5.0
    _pins: dict[DefinitionKey, tuple[Baseline, str]] = attrs.field(factory=dict)
    _holds: dict[DefinitionKey, Held] = attrs.field(factory=dict)
    _events: list[TrustEvent] = attrs.field(factory=list)
    _dropped: int = 0  # events past MAX_PENDING_EVENTS since the last write
    _unloaded: set[str] = attrs.field(factory=set)
    _known: set[str] = attrs.field(factory=set)  # backends loaded or asked for: loaded again by `retry`
    _wake: trio.Event = attrs.field(factory=trio.Event)
    _lock: trio.Lock = attrs.field(factory=trio.Lock)  # one store operation at a time
    _opened: bool = False

    def note(self, writes: Writes) -> None:
        """The catalog's writes (sync: it never waits on the store)."""
        self._pins.update(writes.pins)
        self._holds.update(writes.holds)
        room = MAX_PENDING_EVENTS - len(self._events)
        self._events += writes.events[: max(room, 0)]
        self._dropped += max(len(writes.events) - max(room, 0), 0)
        self._wake.set()

    def load_later(self, backends: Sequence[str]) -> None:
        """Backends whose baselines the catalog needs (new in the config, or changed on another replica)."""
        self._unloaded.update(backends)
        self._known.update(backends)
        self._wake.set()

    async def open(self, backends: Sequence[str]) -> None:
        """At start, before any backend: the store opened and these backends' baselines handed to the
        catalog. TrustStoreUnavailableError when the store does not answer: `run` then tries again until it
        does (their definitions are held as UNKNOWN meanwhile)."""
        if not backends:
            return
        self._unloaded.update(backends)
        self._known.update(backends)
        self._wake.set()
        async with self._lock:
            await self._ensure_open()
            loaded = await self.store.load(backends)
        self._unloaded.difference_update(backends)
        for backend in backends:
            await self.catalog.send(TrustLoaded(backend, loaded.get(backend, BackendTrust())))

    async def retry(self) -> None:
        """The store answers again (the fleet's Redis): what waits for it is tried now, and every backend's
        trust is loaded again (another replica's notices may have been lost meanwhile)."""
        self._unloaded.update(self._known)
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                if not (await self._write() and await self._load()):
                    with trio.move_on_after(RETRY_S):  # or sooner, when the store says it is back
                        await self._wake.wait()
                    self._wake.set()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(self.flush_s):
                await self._write()
                await self.store.close()

    async def _ensure_open(self) -> None:
        if not self._opened:
            await self.store.open()
            self._opened = True
            logger.info("trust: baselines in {}", self.store.shown)

    async def _write(self) -> bool:
        """What is noted, written; False when the store did not take it (kept for the next try)."""
        if not (self._pins or self._holds or self._events or self._dropped):
            return True
        pins, holds, events, dropped = self._pins, self._holds, self._events, self._dropped
        self._pins, self._holds, self._events, self._dropped = {}, {}, [], 0
        if dropped:
            logger.warning("trust: {} events were not kept (the store was behind)", dropped)
        try:
            async with self._lock:
                await self._ensure_open()
                lost = await self.store.write(Writes(pins, holds, tuple(events)))
        except TrustStoreUnavailableError as exc:
            logger.warning("trust: could not write to the store ({}); trying again", exc)
            self._pins, self._holds = {**pins, **self._pins}, {**holds, **self._holds}
            self._events = (events + self._events)[:MAX_PENDING_EVENTS]
            return False
        for backend, found in lost.items():  # another gateway pinned another form first: its pin holds
            await self.catalog.send(TrustLoaded(backend, found))
        if self.on_written is not None:
            for backend in sorted({key.backend for key in (*pins, *holds)}):
                self.on_written(backend)
        return True

    async def _load(self) -> bool:
        """The backends waiting for their baselines, loaded and handed to the catalog."""
        if not self._unloaded:
            return True
        names = sorted(self._unloaded)
        try:
            async with self._lock:
                await self._ensure_open()
                loaded = await self.store.load(names)
        except TrustStoreUnavailableError as exc:
            logger.warning("trust: could not load baselines of {} ({}); held until it answers", names, exc)
            return False
        self._unloaded.difference_update(names)
        for backend in names:
            await self.catalog.send(TrustLoaded(backend, loaded.get(backend, BackendTrust())))
        return True

    async def decide(self, key: DefinitionKey, held: Held, approve: bool, by: str) -> str | None:
        """An operator's decision on `held`, stored (after what is noted) and applied by the catalog before
        this returns; else why not, in one line."""
        decision = Decision(key, held.digest, approve, by, held, time.time())
        with trio.move_on_after(DECIDE_WAIT_S):
            if not await self._write():
                return "the trust store is unavailable; try again"
            try:
                async with self._lock:
                    await self._ensure_open()
                    await self.store.decide(decision)
            except TrustStoreUnavailableError as exc:
                return f"the trust store is unavailable ({exc}); try again"
            except DecisionRefusedError as exc:
                return str(exc)
            approved = decision.baseline() if approve else None
            decided = TrustDecided(key, held.digest, approved, by)
            await self.catalog.send(decided)
            await decided.applied.wait()
            logger.info(
                "trust: {} {} {} (digest {}) by {}",
                "approved" if approve else "rejected",
                key.kind,
                key.shown,
                held.digest[:12],
                by,
            )
            if self.on_written is not None:
                self.on_written(key.backend)
            return None
        return f"the decision took longer than {DECIDE_WAIT_S}s; check `mcp-gateway trust list`"

    async def text_of(self, key: DefinitionKey) -> str | None:
        """The approved text of `key` (for a diff), or None."""
        try:
            async with self._lock:
                await self._ensure_open()
                return await self.store.text_of(key)
        except TrustStoreUnavailableError:
            return None

    async def events(self, limit: int = LOG_LIMIT) -> list[TrustEvent]:
        try:
            async with self._lock:
                await self._ensure_open()
                return await self.store.events(min(limit, LOG_LIMIT))
        except TrustStoreUnavailableError:
            return []

    def pending(self) -> Mapping[str, int]:
        """What waits for the store (for /status)."""
        return {"pins": len(self._pins), "held": len(self._holds), "events": len(self._events)}
