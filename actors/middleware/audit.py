"""The built-in audit middleware: one record per tools/call in an SQLite file, rotated by size.

A record holds when the call came, its session and the client's subject, backend and tool, how long it
took, how it ended, and the sizes of its arguments and result; argument values only with
`include_arguments = true`. Records are queued by the sessions and written in batches by one writer task
(SQLite in a worker thread, so the event loop never waits on the disk). A full queue makes calls wait
rather than lose records; shutdown writes what is queued before the gateway exits.
"""

from __future__ import annotations

import datetime
import sqlite3
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.config import AuditSettings
from actors.errors import GatewayStartError
from actors.middleware.base import CallOutcome, Middleware, ToolCall

QUEUE_SIZE: Final = 10_000  # records waiting for the writer before calls wait for it
BATCH_SIZE: Final = 500  # records per transaction
FLUSH_AT_SHUTDOWN_S: Final = 5.0
SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    time TEXT NOT NULL,           -- when the gateway received the call, ISO 8601 UTC
    session TEXT NOT NULL,
    subject TEXT,                 -- the bearer token's sub, when the frontend checks tokens
    client TEXT,                  -- clientInfo.name
    backend TEXT,                 -- NULL when no backend has the tool
    tool TEXT NOT NULL,           -- the public name called
    backend_tool TEXT,            -- the backend's own name for it
    duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL,        -- ok, tool_error, error, rejected, cancelled
    error_code INTEGER,
    argument_bytes INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL,
    arguments TEXT                -- JSON, only with include_arguments = true
)
"""
INSERT: Final = (
    "INSERT INTO calls (time, session, subject, client, backend, tool, backend_tool, duration_ms, outcome,"
    " error_code, argument_bytes, result_bytes, arguments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
Record = tuple[Any, ...]


def _size(value: Any) -> int:
    return 0 if value is None else len(orjson.dumps(value))


def make_record(call: ToolCall, outcome: CallOutcome, include_arguments: bool) -> Record:
    when = datetime.datetime.fromtimestamp(call.started_at, datetime.UTC).isoformat(timespec="milliseconds")
    body = outcome.error.to_wire() if outcome.error is not None else outcome.result
    return (
        when,
        call.client.session,
        call.client.subject,
        call.client.name,
        call.backend,
        call.tool,
        call.backend_tool,
        round(outcome.duration_s * 1000, 3),
        outcome.status,
        outcome.error.code if outcome.error is not None else None,
        _size(call.arguments),
        _size(body) if not outcome.cancelled else 0,
        orjson.dumps(call.arguments).decode() if include_arguments and call.arguments is not None else None,
    )


@attrs.define
class AuditStore:
    """The SQLite file and its rotation. Used from one worker thread at a time."""

    settings: AuditSettings
    _db: sqlite3.Connection | None = None

    def open(self) -> None:
        self.settings.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.settings.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(SCHEMA)

    def write(self, records: list[Record]) -> None:
        if self._db is None:
            self.open()
        assert self._db is not None
        with self._db:  # one transaction per batch
            self._db.execute("BEGIN")
            self._db.executemany(INSERT, records)
        if self.settings.path.stat().st_size > self.settings.max_bytes:
            self.rotate()

    def rotate(self) -> None:
        """path -> path.1 -> path.2 ... ; the oldest beyond `backups` is deleted; a new file is started."""
        self.close()
        path = self.settings.path
        oldest = path.with_name(f"{path.name}.{self.settings.backups}")
        oldest.unlink(missing_ok=True)
        for n in range(self.settings.backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if older.exists():
                older.rename(path.with_name(f"{path.name}.{n + 1}"))
        if self.settings.backups > 0:
            path.rename(path.with_name(f"{path.name}.1"))
        else:
            path.unlink()
        self.open()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


@attrs.define
class AuditMiddleware(Middleware):
    """Owns: the audit file (through its store) and the queue of records not yet written.
    Receives: every finished tools/call from the sessions (after_call).
    Stops when: cancelled at shutdown, after writing what is queued."""

    settings: AuditSettings
    _store: AuditStore = attrs.field(init=False)
    _queue: trio.MemorySendChannel[Record] = attrs.field(init=False)
    _pending: trio.MemoryReceiveChannel[Record] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._store = AuditStore(self.settings)
        self._queue, self._pending = trio.open_memory_channel[Record](QUEUE_SIZE)

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        await self._queue.send(make_record(call, outcome, self.settings.include_arguments))
        return outcome

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await trio.to_thread.run_sync(self._store.open)
        except (OSError, sqlite3.Error) as exc:
            raise GatewayStartError(f"cannot open the audit log {self.settings.path}: {exc}") from None
        logger.info("audit log: {}", self.settings.path)
        task_status.started()
        try:
            while True:
                batch = [await self._pending.receive()]
                await self._write(self._more(batch))
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(FLUSH_AT_SHUTDOWN_S):
                batch = self._more([])
                while batch:
                    await self._write(batch)
                    batch = self._more([])
            self._store.close()

    def _more(self, batch: list[Record]) -> list[Record]:
        """`batch` and whatever else is queued, up to BATCH_SIZE records."""
        while len(batch) < BATCH_SIZE:
            try:
                batch.append(self._pending.receive_nowait())
            except trio.WouldBlock:
                break
        return batch

    async def _write(self, batch: list[Record]) -> None:
        try:
            await trio.to_thread.run_sync(self._store.write, batch)
        except (OSError, sqlite3.Error) as exc:
            logger.error(
                "audit log: could not write {} records to {}: {}", len(batch), self.settings.path, exc
            )
