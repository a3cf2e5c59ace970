"""The built-in audit middleware: one record per tools/call in an SQLite file, rotated by age and size.

A record holds one round of a call (its call id and round number: a call that asks for input takes
several), when it came, its session and the client's subject, backend and tool, how long it
took, how it ended, and the sizes of its arguments and result; argument values only with
`include_arguments = true`. A call that needs the user's approval has its question and the answer as
rounds too (decision "approve", the `approval` step and the digest the answer is bound to).
Records are queued by the sessions and written in batches by one writer task
(SQLite in a worker thread, so the event loop never waits on the disk). A full queue makes calls wait
rather than lose records; shutdown writes what is queued before the gateway exits.

Every stored text (names, arguments) is redacted first (runtime/redact.py): a secret the gateway knows, or
text shaped like a credential, is stored as a marker naming it, never as its value.

What a client can do to the trail: every stored name is cut to NAME_BYTES and the arguments to
`max_argument_bytes` (the `cut` column names what was cut), and text is stored with its control
characters escaped, so one record stays small and prints as one line. A number a peer chose (a backend's
error code may be any 64-bit integer) is stored only when a 64-bit signed column holds it, else NULL and
named in `cut`. Should a store still refuse a record, its batch is written again one record at a time, so
one record is lost, not its batch, and the writer goes on; a fault of the writer itself is logged and the
writer restarted by its supervisor (the gateway's), never the gateway ended. Files are 0600 in a 0700 folder.
A flood still fills files and so rotates the oldest away, but a record survives until `backups` whole
files of newer records (backups * max_bytes) have been written after it, and each rotation and deletion is
logged with its record count and time span (a rotation by size before `max_age_s`: a warning).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.config import AuditSettings
from actors.middleware import exchange_audit
from actors.middleware.audit_names import NAME_BYTES as NAME_BYTES
from actors.middleware.audit_names import cap_name, prefix, redacted_names
from actors.middleware.base import CallOutcome, Middleware, ToolCall
from actors.middleware.exchange_audit import ExchangeRecord, TokenRequestRow, exchange_record
from actors.protocol.errors import GatewayStartError
from actors.runtime.log import escape_controls, escape_json_controls
from actors.runtime.redact import redact

if TYPE_CHECKING:
    from actors.middleware.audit_postgres import PostgresAuditStore

QUEUE_SIZE: Final = 10_000  # records waiting for the writer before calls wait for it
BATCH_SIZE: Final = 500  # records per transaction
FLUSH_AT_SHUTDOWN_S: Final = 5.0
FILE_MODE: Final = 0o600  # the records name who called what: the gateway's user only
FOLDER_MODE: Final = 0o700
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
    outcome TEXT NOT NULL,        -- ok, tool_error, input_required, error, rejected, cancelled
    error_code INTEGER,
    argument_bytes INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL,
    arguments TEXT,               -- JSON, only with include_arguments = true; cut to max_argument_bytes
    cut TEXT,                     -- the fields cut to their cap, comma-separated ("tool,arguments")
    call_id TEXT,                 -- the same for every round of one call
    round INTEGER NOT NULL DEFAULT 1, -- 1 for the call, 2, 3... for each retry after it asked for input
    decision TEXT,                -- the [policy]'s: allow, deny or approve; NULL without a [policy]
    rule TEXT,                    -- the rule that decided (its name, "rules[N]", "default"...)
    approval TEXT,                -- with decision approve: asked, accepted, declined, expired... (base.py)
    approval_digest TEXT          -- what the approval is bound to: principal, route, tool, arguments (hashed)
)
"""
# Columns added since the first files were written: a file without one gains it when opened.
ADDED_COLUMNS: Final = {
    "cut": "cut TEXT",
    "call_id": "call_id TEXT",
    "round": "round INTEGER NOT NULL DEFAULT 1",
    "decision": "decision TEXT",
    "rule": "rule TEXT",
    "approval": "approval TEXT",
    "approval_digest": "approval_digest TEXT",
}
# Names and arguments are stored with control characters escaped (\xNN, \uNNNN; in arguments as JSON
# escapes), so the stored JSON means what the client sent.
INSERT: Final = (
    "INSERT INTO calls (time, session, subject, client, backend, tool, backend_tool, duration_ms, outcome,"
    " error_code, argument_bytes, result_bytes, arguments, cut, call_id, round, decision, rule, approval,"
    " approval_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
NAME_FIELDS: Final = ("session", "subject", "client", "backend", "tool", "backend_tool")
INT64_MIN: Final = -(2**63)  # an INTEGER column of SQLite, a BIGINT of PostgreSQL
INT64_MAX: Final = 2**63 - 1
Record = tuple[Any, ...]


def storable_int(value: int | None) -> int | None:
    """`value` where a 64-bit signed column holds it; None (NULL) where it does not."""
    return value if value is not None and INT64_MIN <= value <= INT64_MAX else None


def _size(value: Any) -> int:
    return 0 if value is None else len(orjson.dumps(value))


def cap_arguments(raw: bytes, limit: int) -> tuple[str, bool]:
    """Arguments (as JSON) as stored: control characters JSON-escaped, at most `limit` bytes; and whether
    they were cut (then the text is no longer whole JSON; argument_bytes still says the full size)."""
    text = escape_json_controls(prefix(raw, limit))
    stored = prefix(text.encode(), limit)
    return stored, len(raw) > limit or len(stored) < len(text)


def make_record(
    call: ToolCall, outcome: CallOutcome, include_arguments: bool, max_argument_bytes: int = 4096
) -> Record:
    when = datetime.datetime.fromtimestamp(call.started_at, datetime.UTC).isoformat(timespec="milliseconds")
    body = outcome.error.to_wire() if outcome.error is not None else outcome.result
    client = call.client
    values = (client.session, client.subject, client.name, call.backend, call.tool, call.backend_tool)
    names = [cap_name(value) for value in redacted_names(*values, call.call_id or None, call.rule)]
    rule, call_id = names.pop()[0], names.pop()[0]  # the last two, in reverse
    cut = [field for field, (_, was_cut) in zip(NAME_FIELDS, names, strict=True) if was_cut]
    raw = orjson.dumps(call.arguments) if call.arguments is not None else None
    arguments = None
    if include_arguments and raw is not None:
        # redacted before it is cut, so a secret the cut would split is taken out whole; JSON stays JSON
        arguments, was_cut = cap_arguments(redact(raw.decode()).encode(), max_argument_bytes)
        cut += ["arguments"] if was_cut else []
    code = outcome.error.code if outcome.error is not None else None
    cut += ["error_code"] if storable_int(code) != code else []
    session, subject, client_name, backend, tool, backend_tool = (name for name, _ in names)
    return (
        when,
        session,
        subject,
        client_name,
        backend,
        tool,
        backend_tool,
        round(outcome.duration_s * 1000, 3),
        outcome.status,
        storable_int(code),
        len(raw) if raw is not None else 0,
        _size(body) if not outcome.cancelled else 0,
        arguments,
        ",".join(cut) or None,
        call_id,
        call.round if type(call.round) is int else 1,
        call.decision,
        rule,
        cap_name(call.approval)[0],
        cap_name(call.approval_digest)[0],
    )


def split_records(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """The records of the calls table and those of the token_requests table (exchange_audit.py)."""
    exchanges = [record for record in records if type(record) is ExchangeRecord]
    if not exchanges:
        return records, []
    return [record for record in records if type(record) is not ExchangeRecord], exchanges


def _timestamp(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()


@attrs.define
class AuditStore:
    """The SQLite file and its rotation. Used from one worker thread at a time. `errors`: what opening it
    may raise; `unavailable`: what says the file cannot be written at all (disk, permissions, locks), where
    any other error of a write is about the records written.

    The file is created 0600 (SQLite gives its journal the same mode; a rename keeps it), in a folder
    created 0700; an existing folder open to others gets one warning. It is rotated before a write once
    its first record is older than `max_age_s` (0: never by age), and after a write that took it past
    `max_bytes`."""

    errors: ClassVar[tuple[type[Exception], ...]] = (OSError, sqlite3.Error)
    unavailable: ClassVar[tuple[type[Exception], ...]] = (OSError, sqlite3.OperationalError)

    settings: AuditSettings
    _db: sqlite3.Connection | None = None
    _first_at: float | None = None  # the current file's first record, wall clock
    _warned: bool = False

    @property
    def shown(self) -> str:
        return str(self.settings.path)

    def open(self) -> None:
        path = self.settings.path
        self._private_folder(path.parent)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))  # no-op on an existing file
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(SCHEMA)
        self._db.execute(exchange_audit.SQLITE_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(calls)")}
        for column, definition in ADDED_COLUMNS.items():
            if column not in columns:  # a file from before the column was added
                self._db.execute(f"ALTER TABLE calls ADD COLUMN {definition}")
        first = self._db.execute("SELECT time FROM calls ORDER BY id LIMIT 1").fetchone()
        self._first_at = _timestamp(first[0]) if first is not None else None

    def _private_folder(self, folder: Path) -> None:
        try:
            folder.mkdir(mode=FOLDER_MODE, parents=True)
            return
        except FileExistsError:
            pass
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & ~FOLDER_MODE and not self._warned:
            self._warned = True
            logger.warning("audit log: folder {} is open to others (mode {:o}); chmod 700 it", folder, mode)

    def write(self, records: list[Record]) -> None:
        if self._db is None:
            self.open()
        if self._too_old():
            self.rotate("age")
        assert self._db is not None
        calls, exchanges = split_records(records)
        with self._db:  # one transaction per batch
            self._db.execute("BEGIN")
            self._db.executemany(INSERT, calls)
            self._db.executemany(exchange_audit.SQLITE_INSERT, exchanges)
        if self._first_at is None and records:
            self._first_at = _timestamp(records[0][0])
        if self.settings.path.stat().st_size > self.settings.max_bytes:
            self.rotate("size")

    def _too_old(self) -> bool:
        max_age_s = self.settings.max_age_s
        return max_age_s > 0 and self._first_at is not None and time.time() - self._first_at > max_age_s

    def rotate(self, reason: str = "size") -> None:
        """path -> path.1 -> path.2 ... ; the oldest beyond `backups` is deleted; a new file is started.
        Each step is logged with the records it moved or deleted, so no flood erases records unseen."""
        self.close()
        path, backups = self.settings.path, self.settings.backups
        # By size before the age limit: more calls than usual, so a warning; by age, or by size only: routine.
        level = "INFO" if reason == "age" or self.settings.max_age_s == 0 else "WARNING"
        logger.log(level, "audit log: rotating {} by {} ({})", path, reason, _span(path))
        oldest = path.with_name(f"{path.name}.{backups}") if backups > 0 else path
        if oldest.exists():
            logger.log(level, "audit log: deleting {} ({})", oldest, _span(oldest))
            oldest.unlink()
        for n in range(backups - 1, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if older.exists():
                older.rename(path.with_name(f"{path.name}.{n + 1}"))
        if backups > 0:
            path.rename(path.with_name(f"{path.name}.1"))
        self.open()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _span(path: Path) -> str:
    """How many records a file holds and from when to when: for the log line that rotates or deletes it."""
    try:
        with contextlib.closing(sqlite3.connect(path)) as db:
            count, first, last = db.execute("SELECT COUNT(*), MIN(time), MAX(time) FROM calls").fetchone()
    except sqlite3.Error as exc:
        return f"unreadable: {exc}"
    return f"{count} records, {first} to {last}" if count else "no records"


@attrs.define
class AuditMiddleware(Middleware):
    """Owns: the audit file (through its store) and the queue of records not yet written.
    Receives: every finished tools/call from the sessions (after_call); every request of a backend's token
        broker to its token endpoint (token_requested).
    Stops when: cancelled at shutdown, after writing what is queued."""

    settings: AuditSettings
    _store: AuditStore | PostgresAuditStore = attrs.field(init=False)
    _queue: trio.MemorySendChannel[Record] = attrs.field(init=False)
    _pending: trio.MemoryReceiveChannel[Record] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self.settings.postgres_url is not None:  # imports psycopg: only when the table names a database
            from actors.middleware.audit_postgres import PostgresAuditStore

            self._store = PostgresAuditStore(self.settings)
        else:
            self._store = AuditStore(self.settings)
        self._queue, self._pending = trio.open_memory_channel[Record](QUEUE_SIZE)

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        settings = self.settings
        record = make_record(call, outcome, settings.include_arguments, settings.max_argument_bytes)
        await self._queue.send(record)
        return outcome

    async def token_requested(self, row: TokenRequestRow) -> None:
        """A token broker's request to a token endpoint, as a row of the token_requests table."""
        await self._queue.send(exchange_record(row))

    async def open(self) -> None:
        try:
            await trio.to_thread.run_sync(self._store.open)
        except self._store.errors as exc:
            raise GatewayStartError(f"cannot open the audit log {self._store.shown}: {exc}") from None
        logger.info("audit log: {}", self._store.shown)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        batch: list[Record] = []  # in hand: a cancel between receiving it and writing it must not lose it
        try:
            while True:
                batch = self._more([await self._pending.receive()])
                await self._write(batch)
                batch = []
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(FLUSH_AT_SHUTDOWN_S):
                batch = self._more(batch)
                while batch:
                    await self._write(batch)
                    batch = self._more([])
            self._store.close()  # a run after a fault opens it again at its first write

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
        except self._store.unavailable as exc:
            self._lost(len(batch), exc)
        except Exception as exc:  # a record the store refuses: the others must not go with it
            logger.warning(
                "audit log: {} refused a batch of {} records ({}: {}); writing them one at a time",
                self._store.shown,
                len(batch),
                type(exc).__name__,
                escape_controls(str(exc)),
            )
            await trio.to_thread.run_sync(self._write_each, batch)

    def _write_each(self, batch: list[Record]) -> None:
        """In the worker thread: each record in a transaction of its own; one refused is logged and left."""
        for index, record in enumerate(batch):
            try:
                self._store.write([record])
            except self._store.unavailable as exc:
                self._lost(len(batch) - index, exc)
                return
            except Exception as exc:
                logger.error(
                    "audit log: could not write the record of {} at {} to {}: {}: {}",
                    escape_controls(str(record[5])),
                    record[0],
                    self._store.shown,
                    type(exc).__name__,
                    escape_controls(str(exc)),
                )

    def _lost(self, count: int, exc: Exception) -> None:
        logger.error("audit log: could not write {} records to {}: {}", count, self._store.shown, exc)
