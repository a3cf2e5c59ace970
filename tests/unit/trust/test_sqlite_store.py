"""The SQLite trust store: what is written comes back, the first pin wins, decisions check the digest, the
log is bounded, the file is private."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from actors.trust import DefinitionKey, Ledger, TrustMode
from actors.trust.sqlite_store import SqliteTrustStore
from actors.trust.store import Decision, DecisionRefusedError, TrustStoreUnavailableError


def tool(name: str, description: str = "Adds numbers.") -> dict[str, Any]:
    return {"name": name, "description": description}


def ledger_with(*lists: list[dict[str, Any]]) -> Ledger:
    ledger = Ledger()
    ledger.merge("b", {}, {})
    for items in lists:
        ledger.judge("b", TrustMode.PIN, "tool", items)
    return ledger


async def test_baselines_and_held_records_survive_a_restart(tmp_path: Path) -> None:
    store = SqliteTrustStore(tmp_path / "private" / "trust.sqlite3")
    ledger = ledger_with([tool("x"), tool("y")], [tool("x", "changed"), tool("y")])
    writes = ledger.take_writes()
    assert writes is not None
    assert await store.write(writes) == {}
    await store.close()
    again = SqliteTrustStore(tmp_path / "private" / "trust.sqlite3")
    loaded = await again.load(["b", "other"])
    assert set(loaded["b"].baselines) == {("tool", "x"), ("tool", "y")} and loaded["other"].baselines == {}
    (held,) = loaded["b"].held.values()
    assert held == ledger.held()[0]
    assert [e.event for e in await again.events(10)] == ["held", "pinned", "pinned"]
    assert await again.text_of(DefinitionKey("b", "tool", "x")) is not None
    assert stat.S_IMODE((tmp_path / "private" / "trust.sqlite3").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700
    await again.close()


async def test_the_first_pin_wins_and_the_loser_learns_it(tmp_path: Path) -> None:
    store = SqliteTrustStore(tmp_path / "trust.sqlite3")
    first, second = ledger_with([tool("x", "one")]), ledger_with([tool("x", "two")])
    await store.write(first.take_writes())  # type: ignore[arg-type]
    lost = await store.write(second.take_writes())  # type: ignore[arg-type]
    assert lost["b"].baselines[("tool", "x")] == first.baseline(DefinitionKey("b", "tool", "x"))
    second.merge("b", lost["b"].baselines, {})
    assert list(second.judge("b", TrustMode.PIN, "tool", [tool("x", "two")])) == ["x"]
    await store.close()


async def test_a_decision_checks_the_reviewed_digest(tmp_path: Path) -> None:
    store = SqliteTrustStore(tmp_path / "trust.sqlite3")
    ledger = ledger_with([tool("x")], [tool("x", "two")])
    (held,) = ledger.held()
    await store.write(ledger.take_writes())  # type: ignore[arg-type]
    ledger.judge("b", TrustMode.PIN, "tool", [tool("x", "three")])
    (newer,) = ledger.held()
    await store.write(ledger.take_writes())  # type: ignore[arg-type]
    with pytest.raises(DecisionRefusedError):
        await store.decide(Decision(held.key, held.digest, True, "alice", held, 1.0))
    await store.decide(Decision(newer.key, newer.digest, True, "alice", newer, 2.0))
    loaded = (await store.load(["b"]))["b"]
    assert loaded.held == {} and loaded.baselines[("tool", "x")].digest == newer.digest
    assert loaded.baselines[("tool", "x")].by == "alice"
    (approved, *_) = await store.events(1)
    assert (approved.event, approved.by, approved.old, approved.new) == (
        "approved",
        "alice",
        held.approved,
        newer.digest,
    )
    await store.close()


async def test_the_log_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.trust import sqlite_store

    monkeypatch.setattr(sqlite_store, "MAX_EVENTS", 5)
    store = SqliteTrustStore(tmp_path / "trust.sqlite3")
    for n in range(4):
        await store.write(ledger_with([tool(f"t{n}a"), tool(f"t{n}b"), tool(f"t{n}c")]).take_writes())  # type: ignore[arg-type]
    assert len(await store.events(100)) == 5
    await store.close()


async def test_a_store_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    store = SqliteTrustStore(tmp_path / "taken" / "trust.sqlite3")
    with pytest.raises(TrustStoreUnavailableError):
        await store.load(["b"])
