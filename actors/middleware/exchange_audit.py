"""The audit's second table: one row per request the gateway made to a token endpoint for a backend (the
token broker's, backends/token_broker.py), beside the `calls` table, in the same SQLite file or PostgreSQL
database and by the same writer.

A row says when, for which backend, which grant, whose token it was (the caller's issuer and subject for an
exchange; the gateway's client for its own token), what for (audience, resource, scope), why it was asked
(first, expired, refused by the backend), how it ended (ok, refused, unreachable, failed, with the HTTP
status), how long it took and for how long the token was handed out. Never a token: neither the caller's
nor the one granted. Names are redacted, escaped and capped as the calls table's are.
"""

from __future__ import annotations

import datetime
from typing import Final

import attrs

from actors.middleware.audit_names import cap_name, redacted_names

TABLE: Final = "token_requests"
SQLITE_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id INTEGER PRIMARY KEY,
    time TEXT NOT NULL,           -- when the gateway asked, ISO 8601 UTC
    backend TEXT NOT NULL,
    grant_type TEXT NOT NULL,     -- client_credentials or token_exchange
    issuer TEXT,                  -- whose token: the caller's iss (an exchange), else the token endpoint
    subject TEXT NOT NULL,        -- the caller's sub (an exchange), else the gateway's client id
    target TEXT,                  -- what the token is for: audience, resource, scope:...
    cause TEXT NOT NULL,          -- first, expired, refused_by_backend
    outcome TEXT NOT NULL,        -- ok, refused, unreachable, failed
    status INTEGER,               -- the token endpoint's HTTP status, when it answered
    duration_ms REAL NOT NULL,
    lifetime_s REAL,              -- how long the token is handed out (capped by the caller's exp)
    reason TEXT                   -- why it failed, as the calls it failed were told
)
"""
POSTGRES_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id BIGSERIAL PRIMARY KEY,
    time TIMESTAMPTZ NOT NULL,
    backend TEXT NOT NULL,
    grant_type TEXT NOT NULL,
    issuer TEXT,
    subject TEXT NOT NULL,
    target TEXT,
    cause TEXT NOT NULL,
    outcome TEXT NOT NULL,
    status INTEGER,
    duration_ms DOUBLE PRECISION NOT NULL,
    lifetime_s DOUBLE PRECISION,
    reason TEXT
)
"""
COLUMNS: Final = (
    "time, backend, grant_type, issuer, subject, target, cause, outcome, status, duration_ms, lifetime_s,"
    " reason"
)
SQLITE_INSERT: Final = f"INSERT INTO {TABLE} ({COLUMNS}) VALUES ({', '.join('?' * 12)})"
POSTGRES_INSERT: Final = f"INSERT INTO {TABLE} ({COLUMNS}) VALUES ({', '.join(['%s'] * 12)})"
REASON_BYTES: Final = 1024


@attrs.frozen
class TokenRequestRow:
    """One request to a token endpoint, as the broker saw it."""

    at: float  # wall clock, when asked
    backend: str
    grant_type: str
    issuer: str | None
    subject: str
    target: str
    cause: str
    outcome: str
    status: int | None
    duration_s: float
    lifetime_s: float | None = None
    reason: str | None = None


class ExchangeRecord(tuple):  # type: ignore[type-arg]
    """A stored row of the token_requests table: told from a calls record by its type."""

    __slots__ = ()


def exchange_record(row: TokenRequestRow) -> ExchangeRecord:
    when = datetime.datetime.fromtimestamp(row.at, datetime.UTC).isoformat(timespec="milliseconds")
    names = redacted_names(row.backend, row.issuer, row.subject, row.target, row.reason)
    backend, issuer, subject, target = (cap_name(name)[0] for name in names[:4])
    reason = cap_name(names[4], REASON_BYTES)[0]
    status = row.status if row.status is not None and 0 <= row.status < 1000 else None
    lifetime = round(row.lifetime_s, 3) if row.lifetime_s is not None else None
    return ExchangeRecord(
        (
            when,
            backend,
            row.grant_type,
            issuer,
            subject,
            target,
            row.cause,
            row.outcome,
            status,
            round(row.duration_s * 1000, 3),
            lifetime,
            reason,
        )
    )
