"""The trust keeper: writes coalesced into batches, kept and tried again while the store does not answer,
events bounded, a lost first-sight pin and an operator's decision handed to the catalog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.catalog import trust_keeper as module
from actors.catalog.trust_keeper import TrustDecided, TrustKeeper, TrustLoaded, TrustNews
from actors.trust import DefinitionKey, Ledger, TrustEvent, TrustMode, Writes
from actors.trust.store import BackendTrust, Decision, DecisionRefusedError, TrustStoreUnavailableError


@attrs.define
class FakeStore:
    shown: str = "memory"
    down: bool = False
    writes: list[Writes] = attrs.field(factory=list)
    lost: dict[str, BackendTrust] = attrs.field(factory=dict)
    refuse: bool = False
    decided: list[Decision] = attrs.field(factory=list)
    wrote: trio.Event = attrs.field(factory=trio.Event)

    async def open(self) -> None:
        pass

    async def load(self, backends: Sequence[str]) -> dict[str, BackendTrust]:
        if self.down:
            raise TrustStoreUnavailableError("down")
        return {backend: BackendTrust() for backend in backends}

    async def write(self, writes: Writes) -> dict[str, BackendTrust]:
        if self.down:
            raise TrustStoreUnavailableError("down")
        self.writes.append(writes)
        self.wrote.set()
        return self.lost

    async def decide(self, decision: Decision) -> None:
        if self.refuse:
            raise DecisionRefusedError("it changed since")
        self.decided.append(decision)

    async def text_of(self, key: DefinitionKey) -> str | None:
        return None

    async def events(self, limit: int) -> list[TrustEvent]:
        return []

    async def close(self) -> None:
        pass


def flapping_writes(times: int) -> list[Writes]:
    ledger = Ledger()
    ledger.merge("b", {}, {})
    batches = []
    for n in range(times):
        ledger.judge("b", TrustMode.PIN, "tool", [{"name": "x", "description": f"form {n}"}])
        batches.append(ledger.take_writes())
    return [batch for batch in batches if batch is not None]


async def test_notes_are_coalesced_into_one_write_per_wake() -> None:
    store = FakeStore()
    send, _ = trio.open_memory_channel[TrustNews](8)
    keeper = TrustKeeper(store=store, catalog=send)
    for batch in flapping_writes(100):
        keeper.note(batch)
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run)
        await store.wrote.wait()
        nursery.cancel_scope.cancel()
    (written,) = store.writes
    assert len(written.pins) == 1 and len(written.holds) == 1  # the latest of each definition
    assert len(written.events) == 8  # the ledger's bound: a pin and seven holds


async def test_a_store_that_does_not_answer_keeps_the_writes_and_is_tried_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore(down=True)
    send, _ = trio.open_memory_channel[TrustNews](8)
    keeper = TrustKeeper(store=store, catalog=send)
    (first, *_) = flapping_writes(1)
    keeper.note(first)
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run)
        await trio.sleep(module.RETRY_S * 3)
        assert store.writes == [] and keeper.pending()["pins"] == 1
        store.down = False
        await store.wrote.wait()  # the next try
        nursery.cancel_scope.cancel()
    assert len(store.writes[0].pins) == 1 and keeper.pending() == {"pins": 0, "held": 0, "events": 0}


async def test_events_past_the_cap_are_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "MAX_PENDING_EVENTS", 3)
    keeper = TrustKeeper(store=FakeStore(), catalog=trio.open_memory_channel[TrustNews](1)[0])
    for batch in flapping_writes(8):
        keeper.note(batch)
    assert keeper.pending()["events"] == 3


async def test_a_lost_pin_is_handed_to_the_catalog() -> None:
    winner = BackendTrust()
    store = FakeStore(lost={"b": winner})
    send, receive = trio.open_memory_channel[TrustNews](8)
    keeper = TrustKeeper(store=store, catalog=send)
    keeper.note(flapping_writes(1)[0])
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run)
        news = await receive.receive()
        nursery.cancel_scope.cancel()
    assert isinstance(news, TrustLoaded) and news.backend == "b" and news.trust is winner


async def test_a_decision_is_stored_then_applied_then_answered() -> None:
    ledger = Ledger()
    ledger.merge("b", {}, {})
    ledger.judge("b", TrustMode.MANUAL, "tool", [{"name": "x"}])
    (held,) = ledger.held()
    store = FakeStore()
    send, receive = trio.open_memory_channel[TrustNews](8)
    told: list[str] = []
    keeper = TrustKeeper(store=store, catalog=send, on_written=told.append)
    answers: list[Any] = []

    async def catalog() -> None:
        news = await receive.receive()
        assert isinstance(news, TrustDecided) and news.approved is not None and store.decided
        news.applied.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(catalog)
        answers.append(await keeper.decide(held.key, held, True, "ana"))
    assert answers == [None] and told == ["b"] and store.decided[0].by == "ana"
    store.refuse = True
    assert await keeper.decide(held.key, held, False, "ana") == "it changed since"
