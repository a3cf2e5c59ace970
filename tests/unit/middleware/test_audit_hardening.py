"""The audit trail against a hostile client: private files, capped and escaped fields, rotation by age and
size that is logged, and how many records a flood must write to push everyone's records out."""

from __future__ import annotations

import json
import sqlite3
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from support import captured_logs

from actors.config import AuditSettings
from actors.middleware.audit import NAME_BYTES, AuditMiddleware, AuditStore, Record, make_record
from actors.middleware.base import CallOutcome, ClientInfo, ToolCall
from actors.protocol.messages import RpcError
from actors.runtime.redact import REDACTOR

MB = 1024 * 1024


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    with captured_logs("INFO") as lines:
        yield lines


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM calls ORDER BY id")]


def call(
    tool: str = "search", client: str | None = "claude-code", arguments: Any = None, at: float | None = None
) -> ToolCall:
    info = ClientInfo("ws-1", "alice", client)
    arguments = arguments if arguments is not None else {}
    return ToolCall(info, tool, "notes", "search", arguments, at if at is not None else time.time())


def record(tool: str = "search", **kwargs: Any) -> Record:
    return make_record(call(tool, **kwargs), CallOutcome(result={"content": []}, duration_s=0.01), True, 4096)


def test_files_are_private_and_rotation_keeps_them_so(tmp_path: Path, log_lines: list[str]) -> None:
    path = tmp_path / "logs" / "audit.sqlite3"
    store = AuditStore(AuditSettings(path=path, max_bytes=16 * 1024, backups=2, max_age_s=0))
    for _ in range(30):
        store.write([record(arguments={"text": "x" * 400})] * 5)
    store.close()
    assert mode(path.parent) == 0o700
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["audit.sqlite3", "audit.sqlite3.1", "audit.sqlite3.2"]
    assert {mode(path.parent / name) for name in names} == {0o600}
    assert not any("open to others" in line for line in log_lines)


def test_a_folder_open_to_others_gets_one_warning(tmp_path: Path, log_lines: list[str]) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    store = AuditStore(
        AuditSettings(path=folder / "audit.sqlite3", max_bytes=16 * 1024, backups=1, max_age_s=0)
    )
    for _ in range(20):  # several rotations, each of which opens the file again
        store.write([record(arguments={"text": "x" * 400})] * 5)
    store.close()
    assert [line for line in log_lines if "open to others" in line] == [
        f"WARNING audit log: folder {folder} is open to others (mode 755); chmod 700 it"
    ]
    assert mode(folder / "audit.sqlite3") == 0o600 and mode(folder / "audit.sqlite3.1") == 0o600


def test_names_are_capped_escaped_and_marked_as_cut() -> None:
    long_tool = "é" * 200  # 400 bytes: cut on a character boundary
    made = make_record(call(long_tool, client="evil\x1b[2J\r\n2026-01-01 forged\u2028"), CallOutcome(), False)
    tool, client, cut = made[5], made[3], made[13]
    assert tool == "é" * (NAME_BYTES // 2) and len(tool.encode()) == NAME_BYTES
    assert client == "evil\\x1b[2J\\x0d\\x0a2026-01-01 forged\\u2028"
    assert cut == "tool"
    made = make_record(call(client="c\x00" * 200), CallOutcome(), False)  # escaping makes it longer
    assert len(made[3].encode()) <= NAME_BYTES and made[3].startswith("c\\x00c\\x00") and made[13] == "client"
    assert make_record(call(), CallOutcome(), False)[13] is None


def test_arguments_are_capped_escaped_and_marked_as_cut() -> None:
    small = {"text": "line\nnext\x7f\x85\u2028\u202e", "n": [1, 2]}
    made = make_record(call(arguments=small), CallOutcome(), True, 64)
    assert json.loads(made[12]) == small and made[13] is None  # escaped the JSON way: the same value
    assert not any(c in made[12] for c in "\n\x7f\x85\u2028\u202e")
    big = {"text": "ü" * 10_000}
    made = make_record(call(arguments=big), CallOutcome(), True, 4096)
    assert len(made[12].encode()) <= 4096 and made[12].startswith('{"text":"üü')
    assert made[10] == len(json.dumps(big, ensure_ascii=False, separators=(",", ":")).encode())
    assert made[13] == "arguments"
    assert make_record(call(arguments=big), CallOutcome(), False)[12] is None  # values only when told


def test_names_and_arguments_are_redacted_before_they_are_cut() -> None:
    """A secret the gateway knows (or a credential's shape) is stored as its marker, in a name or in the
    arguments; one the cap would split is taken out whole, and the arguments stay JSON when not cut."""
    secret = "audit-secret-eccbc87e4b5c"
    REDACTOR.know("test-audit", {"env:AUDIT_SECRET": secret})
    try:
        arguments = {"query": f"token {secret}", "auth": "Bearer 0123456789abcdef"}
        made = make_record(call(tool=f"t-{secret}", arguments=arguments), CallOutcome(), True, 4096)
        cut = make_record(call(arguments={"pad": "x" * 40, "s": secret}), CallOutcome(), True, 64)
    finally:
        REDACTOR.know("test-audit", {})
    assert secret not in repr(made) and secret[:10] not in repr(cut)
    assert made[5] == "t-[REDACTED:env:AUDIT_SECRET]"
    assert json.loads(made[12]) == {
        "query": "token [REDACTED:env:AUDIT_SECRET]",
        "auth": "Bearer [REDACTED:bearer]",
    }
    assert made[10] == len(json.dumps(arguments, separators=(",", ":")).encode())  # the size as sent


def test_rotation_by_age(tmp_path: Path, log_lines: list[str]) -> None:
    path = tmp_path / "audit.sqlite3"
    store = AuditStore(AuditSettings(path=path, max_age_s=60))
    store.write([record("old", at=time.time() - 120)])
    store.write([record("new")])  # the file's first record is 120 s old: rotated before this write
    store.close()
    assert [r["tool"] for r in rows(path.with_name("audit.sqlite3.1"))] == ["old"]
    assert [r["tool"] for r in rows(path)] == ["new"]
    assert any(
        line.startswith("INFO audit log: rotating") and "by age (1 records" in line for line in log_lines
    )
    # A gateway started again on an old file rotates it at its first write, too.
    path = tmp_path / "restarted.sqlite3"
    store = AuditStore(AuditSettings(path=path, max_age_s=60))
    store.write([record("old", at=time.time() - 120)])
    store.close()
    store = AuditStore(AuditSettings(path=path, max_age_s=60))
    store.write([record("after restart")])
    store.close()
    assert [r["tool"] for r in rows(path)] == ["after restart"]
    assert [r["tool"] for r in rows(path.with_name("restarted.sqlite3.1"))] == ["old"]


def test_a_file_from_before_the_cut_column_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE calls (id INTEGER PRIMARY KEY, time TEXT NOT NULL, session TEXT NOT NULL,"
            " subject TEXT, client TEXT, backend TEXT, tool TEXT NOT NULL, backend_tool TEXT,"
            " duration_ms REAL NOT NULL, outcome TEXT NOT NULL, error_code INTEGER,"
            " argument_bytes INTEGER NOT NULL, result_bytes INTEGER NOT NULL, arguments TEXT)"
        )
    db.close()
    store = AuditStore(AuditSettings(path=path))
    store.write([record("t" * 300)])
    store.close()
    (row,) = rows(path)
    assert row["cut"] == "tool"


def test_a_file_from_before_rounds_gains_call_id_and_round_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    with sqlite3.connect(path) as db:  # as a file written before the rounds' columns
        db.execute(
            "CREATE TABLE calls (id INTEGER PRIMARY KEY, time TEXT NOT NULL, session TEXT NOT NULL,"
            " subject TEXT, client TEXT, backend TEXT, tool TEXT NOT NULL, backend_tool TEXT,"
            " duration_ms REAL NOT NULL, outcome TEXT NOT NULL, error_code INTEGER,"
            " argument_bytes INTEGER NOT NULL, result_bytes INTEGER NOT NULL, arguments TEXT, cut TEXT)"
        )
        db.execute(  # written now: a record older than max_age_s (a day) would rotate the file away
            "INSERT INTO calls VALUES (1, ?, 's', NULL, NULL, NULL, 'old', NULL, 1.0, 'ok', NULL, 2, 2, NULL,"
            " NULL)",
            (datetime.now(UTC).isoformat(),),
        )
    db.close()
    store = AuditStore(AuditSettings(path=path))
    second = ToolCall(ClientInfo("ws-1"), "ask", "b", "ask", {}, time.time(), call_id="c-1", round=2)
    store.write([make_record(second, CallOutcome(result={"resultType": "input_required"}), False)])
    store.close()
    assert [(r["tool"], r["call_id"], r["round"], r["outcome"]) for r in rows(path)] == [
        ("old", None, 1, "ok"),
        ("ask", "c-1", 2, "input_required"),
    ]


def test_what_a_flood_must_write_to_push_records_out(tmp_path: Path, log_lines: list[str]) -> None:
    """The numbers of the README: one client controls its clientInfo name, the tool name and the
    arguments; at their caps a record takes at most ~700 bytes, or ~4.7 KB with argument values."""
    for include_arguments, at_least_per_mb in [(False, 1400), (True, 200)]:
        folder = tmp_path / f"arguments-{include_arguments}"
        path = folder / "audit.sqlite3"
        store = AuditStore(AuditSettings(path=path, max_bytes=MB, backups=1, max_age_s=86400))
        flood = make_record(
            call("t" * 1000, client="c" * 1000, arguments={"x": "a" * 100_000}),
            CallOutcome(result={"content": []}),
            include_arguments,
            4096,
        )
        store.write([record("victim")])
        while not path.with_name("audit.sqlite3.1").exists():
            store.write([flood] * 10)
        store.close()
        rotated = rows(path.with_name("audit.sqlite3.1"))
        assert rotated[0]["tool"] == "victim" and len(rotated) >= at_least_per_mb  # moved, not yet deleted
    # Each rotation says what it moved and what it deleted; by size before max_age_s is a warning.
    rotations = [line for line in log_lines if "rotating" in line]
    assert rotations and all(line.startswith("WARNING audit log: rotating") for line in rotations)
    assert all("records, 20" in line for line in rotations)


async def test_a_record_the_writer_took_is_written_when_shutdown_cancels_it_before_the_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.sqlite3"
    audit = AuditMiddleware(AuditSettings(path=path))
    async with trio.open_nursery() as nursery:
        await nursery.start(audit.run)
        await trio.testing.wait_all_tasks_blocked()  # the writer waits in receive()
        outcome = CallOutcome(result={"content": []}, duration_s=0.01)
        await audit.after_call(call("last"), outcome)  # hands the record to the waiting writer...
        nursery.cancel_scope.cancel()  # ...which is cancelled before it reaches the disk
    assert [row["tool"] for row in rows(path)] == ["last"]


def test_a_code_no_64_bit_column_holds_is_stored_as_null_and_named_cut(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    store = AuditStore(AuditSettings(path=path))
    codes = [2**63, 2**64 - 1, -(2**63), 2**63 - 1, -32603]  # every code the codec takes: any 64-bit integer
    store.write([refused_with(code) for code in codes])
    store.close()
    assert [(row["error_code"], row["cut"]) for row in rows(path)] == [
        (None, "error_code"),
        (None, "error_code"),
        (-(2**63), None),
        (2**63 - 1, None),
        (-32603, None),
    ]


def refused_with(code: int) -> Record:
    outcome = CallOutcome(error=RpcError(code, "odd"), duration_s=0.01)
    return make_record(call("odd"), outcome, False, 4096)


async def test_a_record_the_store_refuses_costs_that_record_alone(
    tmp_path: Path, log_lines: list[str]
) -> None:
    path = tmp_path / "audit.sqlite3"
    audit = AuditMiddleware(AuditSettings(path=path))
    await audit.open()
    unstorable = (*record("bad")[:9], 2**64, *record("bad")[10:])  # as no make_record makes it: OverflowError
    await audit._write([record("before"), unstorable, record("after")])
    await audit._write([record("later")])
    assert [row["tool"] for row in rows(path)] == ["before", "after", "later"]
    assert any("refused a batch of 3 records (OverflowError" in line for line in log_lines)
    assert any(line.startswith("ERROR audit log: could not write the record of bad") for line in log_lines)
