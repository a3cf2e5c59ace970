"""Outbound auth per backend (issue #35), with real parts: nanoidp issues the clients' tokens (and the
gateway's own, for client_credentials), a Trio security token service (tests/sts_fixture.py) exchanges them
(RFC 8693), and a recording HTTP backend checks each token's audience and records every header it got.
The clients are the official SDK's over Streamable HTTP."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import jwt
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from nanoidp_fixture import SECRET as NANOIDP_SECRET
from nanoidp_fixture import Idp, nanoidp
from oauth_support import CLIENTS, http_client
from recording_backend import Recorded, recording_backend
from sts_fixture import CLIENT_ID, CLIENT_SECRET, Sts, security_token_service, verify
from support import (
    DEADLINE_S,
    Notifications,
    fast_restarts,
    listed_again,
    running,
    toml_value,
    write_config,
)

AUDIENCE = "tickets-mcp"


@attrs.frozen
class Parts:
    idp: Idp
    sts: Sts
    backend: str  # host:port
    recorded: Recorded


@asynccontextmanager
async def parts(folder: Path) -> AsyncIterator[Parts]:
    async with nanoidp(folder / "idp", CLIENTS) as idp, security_token_service() as sts:

        def check(authorization: str | None) -> dict[str, Any]:
            scheme, _, token = (authorization or "").partition(" ")
            assert scheme == "Bearer"
            return verify(token, AUDIENCE, sts.issuer)

        async with recording_backend("tickets", check) as (address, recorded):
            yield Parts(idp, sts, address, recorded)


def exchange_config(folder: Path, p: Parts, **auth: Any) -> Path:
    table = {
        "kind": "token_exchange",
        "token_url": p.sts.url,
        "client_id": CLIENT_ID,
        "client_secret": {"env": "GW_STS_SECRET"},
        "audience": [AUDIENCE],
        **auth,
    }
    lines = [
        "[[backends]]",
        'name = "tickets"',
        f'url = "http://{p.backend}/mcp"',
        'forward_headers = ["x-tenant"]',
        f"auth = {toml_value(table)}",
        "[http]",
        "port = 0",
        "[http.auth]",
        "[[http.auth.issuers]]",
        f'issuer = "{p.idp.issuer}"',
        "[audit]",
        'path = "audit.sqlite3"',
    ]
    path = folder / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def whoami(client: Any) -> dict[str, Any]:
    result = await client.call_tool("whoami_tickets", {})
    assert not result.is_error, result
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


async def test_a_call_carries_the_callers_identity_by_exchange_never_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with parts(tmp_path) as p, running(exchange_config(tmp_path, p)) as gateway:
        assert gateway.http_url is not None
        token = await p.idp.token("alice-app", gateway.http_url, "tools:echo")
        with trio.fail_after(DEADLINE_S):
            async with http_client(gateway.http_url, token) as client:
                claims = await whoami(client)
    caller = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == caller["sub"] and claims["act"] == {"sub": CLIENT_ID}
    assert claims["aud"] == AUDIENCE and claims["iss"] == p.sts.issuer
    assert not any(token in str(h) for h in p.recorded.headers)
    assert not any(token.encode() in body for body in p.recorded.bodies)


async def until(condition: Any) -> None:
    """Wait until `condition()` holds (checked every 10 ms), within the deadline."""
    with trio.fail_after(DEADLINE_S):
        while not condition():  # noqa: ASYNC110 (the gateway's meters have no event to wait on)
            await trio.sleep(0.01)


async def test_fifty_concurrent_calls_make_one_exchange_and_later_calls_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with parts(tmp_path) as p, running(exchange_config(tmp_path, p)) as gateway:
        assert gateway.http_url is not None
        token = await p.idp.token("alice-app", gateway.http_url, "tools:echo")
        meter = gateway.meters.backend("tickets")
        p.sts.gate = trio.Event()  # the exchange is answered once all 50 calls wait for it
        results: list[Any] = []
        with trio.fail_after(DEADLINE_S):
            async with http_client(gateway.http_url, token) as client:

                async def call() -> None:
                    results.append(await client.call_tool("seen_by_tickets", {}))

                async with trio.open_nursery() as nursery:
                    for _ in range(50):
                        nursery.start_soon(call)
                    await until(lambda: meter.inflight() == 50)
                    p.sts.gate.set()
                assert len(p.sts.exchanges()) == 1
                for _ in range(3):  # within the token's lifetime: from the cache
                    assert not (await client.call_tool("seen_by_tickets", {})).is_error
    assert len(results) == 50 and not any(result.is_error for result in results)
    assert len(p.sts.exchanges()) == 1
    assert len(p.recorded.claims) >= 54  # every call was checked, with the one exchanged token


async def refused_text(client: Any, tool: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(tool, {})
    return caught.value.message


async def test_a_token_service_down_is_asked_once_per_negative_ttl_and_each_call_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with parts(tmp_path) as p:
        config = exchange_config(tmp_path, p, negative_ttl_s=300)
        async with running(config) as gateway:
            assert gateway.http_url is not None
            token = await p.idp.token("alice-app", gateway.http_url, "tools:echo")
            with trio.fail_after(DEADLINE_S):
                async with http_client(gateway.http_url, token) as client:
                    await client.list_tools()  # the backend is up: its own token came before the outage
                    p.sts.fail_status = 500
                    errors = [await refused_text(client, "seen_by_tickets") for _ in range(5)]
    assert len(p.sts.exchanges()) == 1
    assert all(e.startswith("backend 'tickets' is unavailable: no token for it: ") for e in errors)
    assert all(f"{p.sts.url} answered HTTP 500" in e for e in errors)
    assert all("asked again after 300s" in e for e in errors[1:])
    assert not any(b'"tools/call"' in body for body in p.recorded.bodies)  # none went out


def token_rows(folder: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(folder / "audit.sqlite3") as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM token_requests ORDER BY id")]


async def test_a_backend_refusing_a_token_gets_one_new_exchange_then_the_call_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with parts(tmp_path) as p, running(exchange_config(tmp_path, p)) as gateway:
        assert gateway.http_url is not None
        token = await p.idp.token("alice-app", gateway.http_url, "tools:echo")
        with trio.fail_after(DEADLINE_S):
            async with http_client(gateway.http_url, token) as client:
                p.recorded.refuse_calls = 1  # a revoked token: the new one is taken
                assert not (await client.call_tool("seen_by_tickets", {})).is_error
                assert len(p.sts.exchanges()) == 2
                p.recorded.refuse_calls = 2  # the cached token refused, and the one new one too
                error = await refused_text(client, "seen_by_tickets")
                assert len(p.sts.exchanges()) == 3
    assert error == (
        "backend 'tickets' is unavailable: it refused the gateway's credential (HTTP 401 again, after a new"
        " token was asked for)"
    )
    rows = [row for row in token_rows(tmp_path) if row["grant_type"] == "token_exchange"]
    caller = jwt.decode(token, options={"verify_signature": False})
    assert [row["cause"] for row in rows] == ["first", "refused_by_backend", "refused_by_backend"]
    assert {
        (row["backend"], row["issuer"], row["subject"], row["outcome"], row["status"]) for row in rows
    } == {("tickets", p.idp.issuer, caller["sub"], "ok", 200)}
    assert all(row["duration_ms"] > 0 and 0 < row["lifetime_s"] <= 300 for row in rows)
    stored = (tmp_path / "audit.sqlite3").read_bytes()
    assert not any(granted.encode() in stored for granted in p.sts.granted)
    assert token.encode() not in stored


async def test_a_call_without_a_token_is_refused_never_sent_as_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with parts(tmp_path) as p:
        config = exchange_config(tmp_path, p)
        text = config.read_text()
        config.write_text(text[: text.index("[http.auth]")] + text[text.index("[audit]") :])  # no auth
        async with running(config) as gateway:
            assert gateway.http_url is not None
            with trio.fail_after(DEADLINE_S):
                async with Client(streamable_http_client(gateway.http_url), mode="legacy") as client:
                    error = await refused_text(client, "seen_by_tickets")
    assert error.startswith("backend 'tickets' is unavailable: it acts on behalf of the caller")
    assert "sent no token to exchange" in error
    assert not p.sts.exchanges()
    assert not any(b'"tools/call"' in body for body in p.recorded.bodies)


async def nanoidp_check(idp: Idp, audience: str) -> Any:
    """A backend's check of nanoidp's tokens for `audience` (its keys fetched once, before serving)."""
    async with httpx2.AsyncClient() as http:
        keys = jwt.PyJWKSet.from_dict((await http.get(f"{idp.issuer}/.well-known/jwks.json")).json())

    def check(authorization: str | None) -> dict[str, Any]:
        scheme, _, token = (authorization or "").partition(" ")
        assert scheme == "Bearer"
        kid = jwt.get_unverified_header(token)["kid"]
        return jwt.decode(token, keys[kid].key, algorithms=["RS256"], audience=audience)  # type: ignore[no-any-return]

    return check


async def test_static_and_client_credentials_reach_their_backends_and_only_named_client_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_IDP_SECRET", NANOIDP_SECRET)
    (tmp_path / "key").write_text("static-key-0123456789\n")
    clients = {**CLIENTS, "gw-backend": ("notes:read",)}
    async with (
        nanoidp(tmp_path / "idp", clients) as idp,
        recording_backend("keyed") as (keyed, keyed_seen),
        recording_backend("web", await nanoidp_check(idp, "http://web.test/mcp")) as (web, web_seen),
        recording_backend("sock", await nanoidp_check(idp, "ws://sock.test/mcp")) as (sock, sock_seen),
    ):
        own = {
            "kind": "client_credentials",
            "token_url": f"{idp.issuer}/token",
            "client_id": "gw-backend",
        }
        own["client_secret"] = {"env": "GW_IDP_SECRET"}
        static = {
            "kind": "static",
            "header": "X-Api-Key",
            "format": "{secret}",
            "secret": {"file": "key"},
        }
        backends = [
            ("keyed", f"http://{keyed}/mcp", static, ["X-Tenant"]),
            ("web", f"http://{web}/mcp", {**own, "resource": ["http://web.test/mcp"]}, []),
            ("sock", f"ws://{sock}/mcp", {**own, "resource": ["ws://sock.test/mcp"]}, []),
        ]
        lines = []
        for name, url, auth, forwarded in backends:
            lines += ["[[backends]]", f'name = "{name}"', f'url = "{url}"', f"auth = {toml_value(auth)}"]
            lines += [f"forward_headers = {toml_value(forwarded)}", 'headers = { X-Team = "tools" }']
        lines += [
            "[http]",
            "port = 0",
            "[http.auth]",
            "[[http.auth.issuers]]",
            f'issuer = "{idp.issuer}"',
        ]
        config = tmp_path / "gateway.toml"
        config.write_text("\n".join(lines) + "\n")
        async with running(config) as gateway:
            assert gateway.http_url is not None
            token = await idp.token("alice-app", gateway.http_url, "tools:echo")
            sent = {
                "authorization": f"Bearer {token}",
                "cookie": "session=client-cookie-value",
                "x-tenant": "acme",
                "x-other": "not-named",
            }
            with trio.fail_after(DEADLINE_S):
                async with (
                    httpx2.AsyncClient(headers=sent) as http,
                    Client(
                        streamable_http_client(gateway.http_url, http_client=http), mode="legacy"
                    ) as client,
                ):
                    for tool in ("seen_by_keyed", "whoami_web", "whoami_sock"):
                        assert not (await client.call_tool(tool, {})).is_error
    everything = [*keyed_seen.headers, *web_seen.headers, *sock_seen.headers]
    assert not any(token in str(headers) or "client-cookie-value" in str(headers) for headers in everything)
    assert not any("x-other" in headers or "cookie" in headers for headers in everything)
    call = next(headers for headers, body in keyed_seen.posts if b"tools/call" in body)
    assert (call["x-api-key"], call["x-tenant"], call["x-team"]) == ("static-key-0123456789", "acme", "tools")
    assert "authorization" not in call
    initialize = next(headers for headers, body in keyed_seen.posts if b'"initialize"' in body)
    assert "x-tenant" not in initialize and initialize["x-api-key"] == "static-key-0123456789"
    for seen, audience in ((web_seen, "http://web.test/mcp"), (sock_seen, "ws://sock.test/mcp")):
        assert seen.refused == 0 and seen.claims  # every request carried a good token: its own
        assert {claims["sub"] for claims in seen.claims} == {"gw-backend"}
        assert {claims["aud"] for claims in seen.claims} == {audience}
        assert not any("x-tenant" in headers for headers in seen.headers)


async def test_a_reload_that_changes_a_header_secret_takes_effect_in_the_same_session(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("first-static-key-000\n")
    async with recording_backend("keyed") as (keyed, seen):
        static = {
            "kind": "static",
            "header": "X-Api-Key",
            "format": "key {secret}",
            "secret": {"file": "key"},
        }
        lines = [
            "[[backends]]",
            'name = "keyed"',
            f'url = "http://{keyed}/mcp"',
            f"auth = {toml_value(static)}",
        ]
        config = tmp_path / "gateway.toml"
        config.write_text("\n".join([*lines, "[http]", "port = 0"]) + "\n")
        async with running(config) as gateway:
            assert gateway.http_url is not None
            notifications = Notifications()
            client_cm = Client(
                streamable_http_client(gateway.http_url), mode="legacy", message_handler=notifications.handle
            )
            with trio.fail_after(DEADLINE_S):
                async with client_cm as client:
                    assert not (await client.call_tool("seen_by_keyed", {})).is_error
                    (tmp_path / "key").write_text("second-static-key-00\n")
                    seen_changes = notifications.count("notifications/tools/list_changed")
                    outcome = await gateway.reload("a test")
                    assert outcome.ok and outcome.lines[0].startswith("restarted keyed;"), outcome
                    await listed_again(client, notifications, seen_changes, "seen_by_keyed")
                    assert not (await client.call_tool("seen_by_keyed", {})).is_error  # the same session
    calls = [headers["x-api-key"] for headers, body in seen.posts if b"tools/call" in body]
    assert calls[0] == "key first-static-key-000" and calls[-1] == "key second-static-key-00"


async def test_a_websocket_refusing_its_token_at_the_handshake_gets_a_new_one_at_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", CLIENT_SECRET)
    async with security_token_service() as sts:
        refused: list[str] = []

        def check(authorization: str | None) -> dict[str, Any]:
            token = (authorization or "").removeprefix("Bearer ")
            if not refused:  # the first token it sees has been revoked, say
                refused.append(token)
            assert token != refused[0]
            return verify(token, "sock-mcp", sts.issuer)

        async with recording_backend("sock", check) as (sock, seen):
            own = {"kind": "client_credentials", "token_url": sts.url, "client_id": CLIENT_ID}
            own |= {"client_secret": {"env": "GW_STS_SECRET"}, "audience": ["sock-mcp"]}
            backend = {"name": "sock", "url": f"ws://{sock}/mcp", "auth": own, "restart": fast_restarts()}
            config = write_config(tmp_path / "gateway.toml", [backend])
            config.write_text(config.read_text() + "[http]\nport = 0\n")
            async with running(config) as gateway:
                assert gateway.http_url is not None
                notifications = Notifications()
                client_cm = Client(
                    streamable_http_client(gateway.http_url),
                    mode="legacy",
                    message_handler=notifications.handle,
                )
                with trio.fail_after(DEADLINE_S):
                    async with client_cm as client:
                        await listed_again(client, notifications, 0, "seen_by_sock")
                        assert not (await client.call_tool("seen_by_sock", {})).is_error
    assert len(sts.own_grants()) == 2 and seen.refused == 1
    assert refused == [sts.granted[0]]
