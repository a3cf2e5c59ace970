"""The audit's decision and rule columns: filled from the call, added to a file from before them."""

from __future__ import annotations

import datetime
import sqlite3
from pathlib import Path

from actors.config import AuditSettings
from actors.middleware import CallOutcome, ClientInfo, ToolCall
from actors.middleware.audit import AuditStore, make_record

OLD_SCHEMA = """CREATE TABLE calls (id INTEGER PRIMARY KEY, time TEXT NOT NULL, session TEXT NOT NULL,
subject TEXT, client TEXT, backend TEXT, tool TEXT NOT NULL, backend_tool TEXT, duration_ms REAL NOT NULL,
outcome TEXT NOT NULL, error_code INTEGER, argument_bytes INTEGER NOT NULL, result_bytes INTEGER NOT NULL,
arguments TEXT)"""


def test_an_audit_file_from_before_policy_gets_decision_and_rule_columns(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
        db.execute(
            "INSERT INTO calls (time, session, tool, duration_ms, outcome, argument_bytes, result_bytes)"
            " VALUES (?, 's', 't', 1, 'ok', 0, 0)",
            (datetime.datetime.now(datetime.UTC).isoformat(),),  # recent: not rotated away by age
        )
    db.close()
    store = AuditStore(AuditSettings(path=path))
    store.open()
    call = ToolCall(
        ClientInfo("ws-1", "bob"),
        "crash",
        "alpha",
        "crash",
        {},
        0.0,
        decision="deny",
        rule="bob never crashes",
    )
    store.write([make_record(call, CallOutcome(rejected=True), False)])
    store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT tool, outcome, decision, rule FROM calls ORDER BY id").fetchall()
    db.close()
    assert rows == [("t", "ok", None, None), ("crash", "rejected", "deny", "bob never crashes")]
