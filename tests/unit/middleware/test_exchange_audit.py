"""The audit's token_requests table (middleware/exchange_audit.py): a token broker's row written beside the
calls, in the same batch and file, by the same writer; names redacted, escaped and capped as the calls
table's; a status no column means is NULL; the writer takes rows from the broker as from the sessions."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import trio

from actors.config import AuditSettings
from actors.middleware.audit import AuditMiddleware, AuditStore, make_record
from actors.middleware.audit_names import NAME_BYTES
from actors.middleware.base import CallOutcome, ClientInfo, ToolCall
from actors.middleware.exchange_audit import TokenRequestRow, exchange_record
from actors.runtime.redact import REDACTOR


def rows(path: Path, table: str) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY id")]


def request_row(**changes: Any) -> TokenRequestRow:
    fields: dict[str, Any] = {
        "at": time.time(),
        "backend": "tickets",
        "grant_type": "token_exchange",
        "issuer": "https://idp.example",
        "subject": "alice",
        "target": "tickets-mcp",
        "cause": "first",
        "outcome": "ok",
        "status": 200,
        "duration_s": 0.0123,
        "lifetime_s": 270.0,
    }
    return TokenRequestRow(**{**fields, **changes})


def test_a_batch_of_calls_and_token_requests_goes_to_both_tables(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    store = AuditStore(AuditSettings(path=path))
    tool_call = ToolCall(ClientInfo("ws-1", "alice", "c"), "search", "notes", "search", {}, time.time())
    call = make_record(tool_call, CallOutcome(result={}, duration_s=0.01), False)
    refused = request_row(outcome="refused", status=400, reason="https://idp/token refused: invalid_grant")
    store.write([exchange_record(request_row()), call, exchange_record(refused)])
    store.close()
    assert [row["tool"] for row in rows(path, "calls")] == ["search"]
    stored = rows(path, "token_requests")
    assert [(row["outcome"], row["status"], row["reason"]) for row in stored] == [
        ("ok", 200, None),
        ("refused", 400, "https://idp/token refused: invalid_grant"),
    ]
    assert stored[0]["duration_ms"] == 12.3 and stored[0]["lifetime_s"] == 270.0
    assert stored[0]["subject"] == "alice" and stored[0]["cause"] == "first"


def test_names_are_redacted_escaped_and_capped_and_a_wild_status_is_null() -> None:
    REDACTOR.mint("token:tickets", "minted-token-value-0123456789abcdef0123456789", time.time() + 60)
    record = exchange_record(
        request_row(
            subject="eve\n" + "x" * 1000,
            reason="backend echoed minted-token-value-0123456789abcdef0123456789",
            status=70000,
        )
    )
    _, _, _, _, subject, _, _, _, status, _, _, reason = record
    assert subject.startswith("eve\\x0a") and len(subject.encode()) <= NAME_BYTES
    assert reason == "backend echoed [REDACTED:token:tickets]"
    assert status is None


async def test_the_writer_takes_a_brokers_rows_as_it_takes_calls(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    audit = AuditMiddleware(AuditSettings(path=path))
    await audit.open()
    async with trio.open_nursery() as nursery:
        await nursery.start(audit.run)
        await audit.token_requested(request_row(grant_type="client_credentials", subject="mcp-gateway"))
        nursery.cancel_scope.cancel()  # the writer writes what is queued as it stops
    assert [row["grant_type"] for row in rows(path, "token_requests")] == ["client_credentials"]
