"""[audit] postgres_url_env and approvals (#36): a `calls` table made before approvals gains their columns
when the store opens it, and a record of an approval round lands with its step and digest."""

from __future__ import annotations

import psycopg
from fleet_support import PostgresServer

from actors.config import AuditSettings
from actors.middleware import CallOutcome, ClientInfo, ToolCall
from actors.middleware.audit import make_record
from actors.middleware.audit_postgres import SCHEMA, PostgresAuditStore


def test_a_table_from_before_approvals_gains_their_columns(postgres_server: PostgresServer) -> None:
    before = SCHEMA.replace(",\n    approval TEXT,\n    approval_digest TEXT", "")
    assert "approval" not in before
    with psycopg.connect(postgres_server.url, autocommit=True) as db:
        db.execute(before)
    store = PostgresAuditStore(AuditSettings(postgres_url_env="AUDIT_DB", postgres_url=postgres_server.url))
    store.open()
    store.open()  # a second open (a reconnect) adds nothing twice
    call = ToolCall(ClientInfo("stdio"), "rm", "alpha", "rm", {"path": "/"}, 0.0, decision="approve")
    call.rule, call.approval, call.approval_digest = "approve_destructive", "asked", "cd" * 32
    store.write([make_record(call, CallOutcome(result={"resultType": "input_required"}), False)])
    store.close()
    with psycopg.connect(postgres_server.url) as db:
        rows = db.execute("SELECT outcome, decision, rule, approval, approval_digest FROM calls").fetchall()
    assert rows == [("input_required", "approve", "approve_destructive", "asked", "cd" * 32)]
