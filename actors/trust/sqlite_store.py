"""The trust store in an SQLite file (by default `trust.sqlite3` beside the audit file, else beside the
config): baselines, held definitions and the trust log, each written in a worker thread so the event loop
never waits on the disk.

Several gateways may serve one config (an editor's stdio gateways) and so share the file: a first-sight pin
is an INSERT that keeps a row already there, and each write waits up to BUSY_TIMEOUT_MS for another's. They
see each other's decisions at their next start; gateways that must agree at once share Redis ([fleet]).
The file is 0600 in a folder created 0700, as the audit's. The log keeps the newest MAX_EVENTS events.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import orjson
import trio

from actors.trust.definitions import DefinitionKey
from actors.trust.ledger import FIRST_SIGHT, Writes
from actors.trust.records import MAX_DETAIL_CHARS, Baseline, Held, TrustEvent, clean
from actors.trust.store import (
    MAX_EVENTS,
    BackendTrust,
    Decision,
    DecisionRefusedError,
    TrustStoreUnavailableError,
)

FILE_MODE: Final = 0o600
FOLDER_MODE: Final = 0o700
BUSY_TIMEOUT_MS: Final = 5000
SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS baselines (
        backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
        record TEXT NOT NULL,       -- Baseline.as_json
        text TEXT NOT NULL,         -- what the reviewer read (definitions.reviewable)
        PRIMARY KEY (backend, kind, name)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS held (
        backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
        record TEXT NOT NULL,       -- Held.as_json
        PRIMARY KEY (backend, kind, name)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,           -- wall clock, seconds
        backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
        event TEXT NOT NULL,        -- pinned, held, accepted, approved, rejected
        by TEXT NOT NULL,           -- the reviewer, or "gateway"
        old TEXT,                   -- the approved digest before
        new TEXT,                   -- the digest it is about
        detail TEXT NOT NULL)""",
)
_T = TypeVar("_T")


@attrs.define
class SqliteTrustStore:
    path: Path
    _db: sqlite3.Connection | None = None

    @property
    def shown(self) -> str:
        return str(self.path)

    async def open(self) -> None:
        await self._run(self._open)

    def _open(self) -> None:
        if self._db is not None:
            return
        try:
            self.path.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
        except OSError as exc:
            where = exc.filename or self.path  # the folder, when it is what cannot be made
            raise sqlite3.OperationalError(f"cannot create {where}: {exc.strerror or exc}") from None
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        for statement in SCHEMA:
            db.execute(statement)
        self._db = db

    async def _run(self, work: Callable[[], _T]) -> _T:
        """`work` in a worker thread; a store that cannot be read or written is unavailable."""
        try:
            return await trio.to_thread.run_sync(work)
        except (OSError, sqlite3.Error) as exc:
            raise TrustStoreUnavailableError(f"{self.path}: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        self._open()
        assert self._db is not None
        return self._db

    async def load(self, backends: Sequence[str]) -> dict[str, BackendTrust]:
        return await self._run(lambda: self._load(backends))

    def _load(self, backends: Sequence[str]) -> dict[str, BackendTrust]:
        db = self._connection()
        loaded: dict[str, BackendTrust] = {}
        for backend in backends:
            baselines = {
                (kind, name): baseline
                for kind, name, record in db.execute(
                    "SELECT kind, name, record FROM baselines WHERE backend = ?", (backend,)
                )
                if (baseline := Baseline.of(_json(record))) is not None
            }
            held = {
                (record.key.kind, record.key.name): record
                for (raw,) in db.execute("SELECT record FROM held WHERE backend = ?", (backend,))
                if (record := Held.of(_json(raw))) is not None and record.key.backend == backend
            }
            loaded[backend] = BackendTrust(baselines, held)  # type: ignore[arg-type]
        return loaded

    async def write(self, writes: Writes) -> dict[str, BackendTrust]:
        return await self._run(lambda: self._write(writes))

    def _write(self, writes: Writes) -> dict[str, BackendTrust]:
        db = self._connection()
        winners: dict[str, dict[Any, Baseline]] = {}
        with db:
            db.execute("BEGIN IMMEDIATE")
            for key, (baseline, text) in writes.pins.items():
                row = (*_key(key), orjson.dumps(baseline.as_json()).decode(), text)
                if baseline.by == FIRST_SIGHT:
                    db.execute("INSERT OR IGNORE INTO baselines VALUES (?, ?, ?, ?, ?)", row)
                    stored = _baseline(db, key)
                    if stored is not None and stored.digest != baseline.digest:
                        winners.setdefault(key.backend, {})[(key.kind, key.name)] = stored
                else:
                    db.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?)", row)
            for key, held in writes.holds.items():
                db.execute(
                    "INSERT OR REPLACE INTO held VALUES (?, ?, ?, ?)",
                    (*_key(key), orjson.dumps(held.as_json()).decode()),
                )
            self._log(db, writes.events)
        return {backend: BackendTrust(baselines=found) for backend, found in winners.items()}

    async def decide(self, decision: Decision) -> None:
        await self._run(lambda: self._decide(decision))

    def _decide(self, decision: Decision) -> None:
        db = self._connection()
        key = decision.key
        with db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT record FROM held WHERE backend = ? AND kind = ? AND name = ?", _key(key)
            ).fetchone()
            stored = Held.of(_json(row[0])) if row is not None else None
            if stored is not None and stored.digest != decision.digest:
                raise DecisionRefusedError(f"it changed since: held now as {stored.digest}")
            if decision.approve:
                baseline = orjson.dumps(decision.baseline().as_json()).decode()
                db.execute(
                    "INSERT OR REPLACE INTO baselines VALUES (?, ?, ?, ?, ?)",
                    (*_key(key), baseline, decision.held.text),
                )
                db.execute("DELETE FROM held WHERE backend = ? AND kind = ? AND name = ?", _key(key))
            else:
                rejected = attrs.evolve(decision.held, rejected_by=decision.by)
                db.execute(
                    "INSERT OR REPLACE INTO held VALUES (?, ?, ?, ?)",
                    (*_key(key), orjson.dumps(rejected.as_json()).decode()),
                )
            self._log(db, (decision.event(),))

    @staticmethod
    def _log(db: sqlite3.Connection, events: Sequence[TrustEvent]) -> None:
        if not events:
            return
        db.executemany(
            "INSERT INTO events (at, backend, kind, name, event, by, old, new, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (e.at, *_key(e.key), e.event, e.by, e.old, e.new, clean(e.detail, MAX_DETAIL_CHARS))
                for e in events
            ],
        )
        db.execute("DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?", (MAX_EVENTS,))

    async def text_of(self, key: DefinitionKey) -> str | None:
        def read() -> str | None:
            row = (
                self._connection()
                .execute("SELECT text FROM baselines WHERE backend = ? AND kind = ? AND name = ?", _key(key))
                .fetchone()
            )
            return str(row[0]) if row is not None else None

        return await self._run(read)

    async def events(self, limit: int) -> list[TrustEvent]:
        def read() -> list[TrustEvent]:
            rows = self._connection().execute(
                "SELECT at, backend, kind, name, event, by, old, new, detail FROM events"
                " ORDER BY id DESC LIMIT ?",
                (limit,),
            )
            return [
                TrustEvent(at, DefinitionKey(backend, kind, name), event, by, old, new, detail)
                for at, backend, kind, name, event, by, old, new, detail in rows
            ]

        return await self._run(read)

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await trio.to_thread.run_sync(db.close)


def _key(key: DefinitionKey) -> tuple[str, str, str]:
    return key.backend, key.kind, key.name


def _baseline(db: sqlite3.Connection, key: DefinitionKey) -> Baseline | None:
    row = db.execute(
        "SELECT record FROM baselines WHERE backend = ? AND kind = ? AND name = ?", _key(key)
    ).fetchone()
    return Baseline.of(_json(row[0])) if row is not None else None


def _json(text: object) -> object:
    try:
        return orjson.loads(text) if isinstance(text, str | bytes) else None
    except orjson.JSONDecodeError:
        return None
