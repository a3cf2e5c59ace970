"""The audit's PostgreSQL sink ([audit] postgres_url_env): the same records as the SQLite file, in a `calls`
table (and `token_requests`, exchange_audit.py) of the database the URL names, through psycopg's
synchronous API in a worker thread (its async API does not run under Trio). The tables are created when
missing; retention is the database's business, so nothing is rotated here. The URL may hold a password:
it is never logged (the log says host and database). Needs the extra `audit-postgres` (psycopg); imported
only when the table names a database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import attrs

from actors.config import AuditSettings
from actors.middleware import exchange_audit

if TYPE_CHECKING:
    import psycopg

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS calls (
    id BIGSERIAL PRIMARY KEY,
    time TIMESTAMPTZ NOT NULL,
    session TEXT NOT NULL,
    subject TEXT,
    client TEXT,
    backend TEXT,
    tool TEXT NOT NULL,
    backend_tool TEXT,
    duration_ms DOUBLE PRECISION NOT NULL,
    outcome TEXT NOT NULL,
    error_code BIGINT,
    argument_bytes BIGINT NOT NULL,
    result_bytes BIGINT NOT NULL,
    arguments TEXT,
    cut TEXT,
    call_id TEXT,
    round INTEGER NOT NULL DEFAULT 1,
    decision TEXT,
    rule TEXT,
    approval TEXT,
    approval_digest TEXT
)
"""
# Columns added since the first tables were made: a table without one gains it when opened.
ADDED_COLUMNS: Final = ("approval TEXT", "approval_digest TEXT")
INSERT: Final = (
    "INSERT INTO calls (time, session, subject, client, backend, tool, backend_tool, duration_ms, outcome,"
    " error_code, argument_bytes, result_bytes, arguments, cut, call_id, round, decision, rule, approval,"
    " approval_digest) VALUES (" + ", ".join(["%s"] * 20) + ")"
)
CONNECT_S: Final = 5  # a database that does not answer within this fails the start (or the batch)


def where(url: str) -> str:
    """host:port/database of a URL, for the log: never its user or password."""
    parts = urlsplit(url)
    return f"postgresql {parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


@attrs.define
class PostgresAuditStore:
    """The database connection. Used from one worker thread at a time; a batch is one transaction, and a
    lost connection is opened again for the next batch."""

    settings: AuditSettings
    _db: psycopg.Connection[Any] | None = None

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        import psycopg  # the `audit-postgres` extra: every module of the package imports without it

        return (psycopg.Error, OSError)

    @property
    def unavailable(self) -> tuple[type[Exception], ...]:
        """The database out of reach (connection, server): any other error is about the records written."""
        import psycopg

        return (psycopg.OperationalError, OSError)

    @property
    def shown(self) -> str:
        assert self.settings.postgres_url is not None
        return where(self.settings.postgres_url)

    def open(self) -> None:
        import psycopg

        assert self.settings.postgres_url is not None
        self._db = psycopg.connect(self.settings.postgres_url, connect_timeout=CONNECT_S, autocommit=True)
        self._db.execute(SCHEMA)
        for column in ADDED_COLUMNS:
            self._db.execute(f"ALTER TABLE calls ADD COLUMN IF NOT EXISTS {column}")
        self._db.execute(exchange_audit.POSTGRES_SCHEMA)

    def write(self, records: list[tuple[Any, ...]]) -> None:
        if self._db is None or self._db.closed:
            self.open()
        assert self._db is not None
        import psycopg

        exchanges = [record for record in records if type(record) is exchange_audit.ExchangeRecord]
        calls = [record for record in records if type(record) is not exchange_audit.ExchangeRecord]
        try:
            with self._db.transaction(), self._db.cursor() as cursor:
                if calls:
                    cursor.executemany(INSERT, calls)
                if exchanges:
                    cursor.executemany(exchange_audit.POSTGRES_INSERT, exchanges)
        except psycopg.OperationalError:
            self.close()  # the connection is gone: the next batch opens a new one
            raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
