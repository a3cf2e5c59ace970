"""[audit] postgres_url_env: the audit's records in a real PostgreSQL (psycopg's sync API in a worker thread),
one row per tools/call round, as in the SQLite file; the URL never logged."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
import trio
from fleet_support import PostgresServer
from loguru import logger
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, backend_entry, running, with_http, write_config

from actors.config import AuditSettings
from actors.middleware.audit import make_record
from actors.middleware.audit_postgres import PostgresAuditStore
from actors.middleware.base import CallOutcome, ClientInfo, ToolCall
from actors.middleware.exchange_audit import TokenRequestRow, exchange_record


async def test_audit_records_land_in_postgresql_and_its_url_is_never_logged(
    tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_password = postgres_server.url.replace("postgres@", "postgres:pg-s3cret@")  # trust auth ignores it
    monkeypatch.setenv("AUDIT_DB", with_password)
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    config = with_http(write_config(tmp_path / "g.toml", [backend_entry("t")]))
    config.write_text(config.read_text() + '\n[audit]\npostgres_url_env = "AUDIT_DB"\n')
    async with running(config) as gateway:
        assert gateway.http_url
        with trio.fail_after(DEADLINE_S):
            async with Client(streamable_http_client(gateway.http_url), mode="legacy") as client:
                for text in ("one", "two"):
                    assert not (await client.call_tool("echo", {"text": text})).is_error
                # A code past BIGINT (the codec takes any 64-bit integer) is a NULL, not a lost batch
                with pytest.raises(MCPError):
                    await client.call_tool("rpc_error", {"code": 2**63, "message": "odd"})
                assert not (await client.call_tool("echo", {"text": "three"})).is_error
    logger.remove(sink)
    assert any("audit log: postgresql 127.0.0.1" in line for line in lines)
    assert not any("pg-s3cret" in line for line in lines)
    # the gateway has stopped: what was queued is written
    with psycopg.connect(postgres_server.url) as db:
        rows = db.execute("SELECT tool, outcome, error_code, cut FROM calls ORDER BY id").fetchall()
    assert rows == [
        ("echo", "ok", None, None),
        ("echo", "ok", None, None),
        ("rpc_error", "error", None, "error_code"),
        ("echo", "ok", None, None),
    ]


def test_token_requests_land_in_their_own_postgresql_table_beside_the_calls(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    store = PostgresAuditStore(AuditSettings(path=tmp_path / "unused", postgres_url=postgres_server.url))
    call = ToolCall(ClientInfo("http-1", "alice", "c"), "whoami", "tickets", "whoami", {}, time.time())
    row = TokenRequestRow(
        at=time.time(),
        backend="tickets",
        grant_type="token_exchange",
        issuer="https://idp.example",
        subject="alice",
        target="tickets-mcp",
        cause="first",
        outcome="ok",
        status=200,
        duration_s=0.02,
        lifetime_s=270.0,
    )
    store.write([exchange_record(row), make_record(call, CallOutcome(result={}, duration_s=0.01), False)])
    store.close()
    with psycopg.connect(postgres_server.url) as db:
        calls = db.execute("SELECT tool FROM calls WHERE backend = 'tickets'").fetchall()
        columns = "backend, grant_type, subject, outcome, status, duration_ms, lifetime_s"
        requests = db.execute(f"SELECT {columns} FROM token_requests").fetchall()
    assert calls == [("whoami",)]
    assert requests == [("tickets", "token_exchange", "alice", "ok", 200, 20.0, 270.0)]
