"""Where a principal reaches and where its token does not: the client's token never reaches an HTTP, a
WebSocket or a stdio backend; the stdio session (no token) is the principal [stdio] names; the admin
listener's metrics show each trusted issuer's keys and failed fetches."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import jwt
import trio
from admin_support import admin_gateway, sample, with_admin
from cryptography.hazmat.primitives.asymmetric import rsa
from nanoidp_fixture import nanoidp
from oauth_support import CLIENTS, TOOL_SCOPES, http_client, listed
from recording_backend import recording_backend
from support import DEADLINE_S, TEST_BACKEND, backend_entry, running, sdk_client, write_config


async def test_the_client_token_never_reaches_an_http_a_websocket_or_a_stdio_backend(tmp_path: Path) -> None:
    piped = tmp_path / "stdio-backend-input.jsonl"
    async with (
        nanoidp(tmp_path / "idp", CLIENTS) as idp,
        recording_backend("web") as (web_address, web),
        recording_backend("sock") as (sock_address, sock),
    ):
        stdio = {
            "name": "pipe",
            "command": "sh",
            "args": ["-c", f'tee "{piped}" | "{sys.executable}" "{TEST_BACKEND}" --name pipe --only=echo'],
        }
        backends = [
            {"name": "web", "url": f"http://{web_address}/mcp"},
            {"name": "sock", "url": f"ws://{sock_address}/mcp"},
            stdio,
        ]
        config = write_config(tmp_path / "gateway.toml", backends)
        config.write_text(
            config.read_text()
            + f'\n[http]\nport = 0\n[http.auth]\n[[http.auth.issuers]]\nissuer = "{idp.issuer}"\n'
        )
        async with running(config) as gateway:
            assert gateway.http_url is not None
            token = await idp.token("alice-app", gateway.http_url, "tools:echo")
            with trio.fail_after(DEADLINE_S):
                async with http_client(gateway.http_url, token) as client:
                    for tool, arguments in (
                        ("seen_by_web", {}),
                        ("seen_by_sock", {}),
                        ("echo", {"text": "hi"}),
                    ):
                        assert not (await client.call_tool(tool, arguments)).is_error
    claims = jwt.decode(token, options={"verify_signature": False})
    for recorded in (web, sock):
        assert recorded.headers and recorded.bodies  # it was reached, by the handshake and the call
        assert not any("authorization" in headers for headers in recorded.headers)
        assert not any(token.encode() in body or claims["jti"].encode() in body for body in recorded.bodies)
    sent = piped.read_text()
    assert '"tools/call"' in sent and token not in sent and claims["jti"] not in sent


async def test_the_stdio_session_is_the_configured_principal_with_its_scopes(tmp_path: Path) -> None:
    """stdio carries no token: [stdio] names its principal, which the tool scopes and the audit see."""
    key = rsa.generate_private_key(65537, 2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo,add")])
    config.write_text(
        config.read_text()
        + '\n[stdio]\nsubject = "alice@laptop"\nissuer = "local"\nscopes = ["tools:echo"]\n'
        + '[audit]\npath = "audit.sqlite3"\n'
        + f"[http]\nport = 0\n[http.auth]\ntool_scopes = {TOOL_SCOPES}\n"
        + '[[http.auth.issuers]]\nissuer = "https://idp.example"\njwks_file = "jwks.json"\n'
    )
    async with sdk_client(config, tmp_path / "gateway.log") as client:
        assert await listed(client) == {"echo"}
        assert not (await client.call_tool("echo", {"text": "hi"})).is_error
    with sqlite3.connect(tmp_path / "audit.sqlite3") as db:
        assert db.execute("SELECT subject, tool FROM calls").fetchall() == [("alice@laptop", "echo")]


async def test_the_admin_metrics_show_each_issuer_keys_and_failed_fetches(tmp_path: Path) -> None:
    async with nanoidp(tmp_path / "idp", CLIENTS) as idp:
        config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")])
        config.write_text(
            config.read_text()
            + f'\n[http]\nport = 0\n[http.auth]\n[[http.auth.issuers]]\nissuer = "{idp.issuer}"\n'
            + '[[http.auth.issuers]]\nissuer = "http://127.0.0.1:1"\njwks_url = "http://127.0.0.1:1/jwks.json"\n'
        )
        async with admin_gateway(with_admin(config), tmp_path / "gateway.log") as gateway:
            with trio.fail_after(DEADLINE_S):
                while True:  # the keepers' first fetches are under way as the gateway starts
                    metrics = await gateway.metrics()
                    down = sample(
                        metrics, "mcp_gateway_jwks_fetch_failures_total", issuer="http://127.0.0.1:1"
                    )
                    if sample(metrics, "mcp_gateway_jwks_keys", issuer=idp.issuer) and down:
                        break
                    await trio.sleep(0.05)
            assert sample(metrics, "mcp_gateway_jwks_fetches_total", frontend="http", issuer=idp.issuer) == 1
            assert sample(metrics, "mcp_gateway_jwks_keys", issuer="http://127.0.0.1:1") == 0
