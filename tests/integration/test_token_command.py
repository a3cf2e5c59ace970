"""`mcp-gateway token`: a token made by the command opens sessions on a real gateway's WebSocket and
Streamable HTTP listeners (signature, exp, audience and issuer as the listeners check them); every way it
cannot make one is a single line on stderr and exit 2, with nothing on stdout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import httpx2
import jwt
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sdk_websocket import websocket_client
from support import (
    DEADLINE_S,
    LEGACY_ERA,
    ROOT,
    backend_entry,
    running,
    with_http,
    with_websocket,
    write_config,
)

from actors.cli_token import TokenError, parse_scopes, parse_ttl

SECRET: Final = "token-command-secret-that-is-long-enough"
VARIABLE: Final = "TOKEN_COMMAND_SECRET"
MINIMAL: Final = '[[backends]]\nname = "a"\ncommand = "python"\n'
AUTH: Final = {"jwt_secret_env": VARIABLE, "audience": "mcp-gateway", "issuer": "https://ops.example"}


def token_command(config: Path, *args: str, secret: str | None = SECRET) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if secret is not None:
        env[VARIABLE] = secret
    argv = [sys.executable, "-m", "actors", "token", "--config", str(config), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def gateway_with_auth(tmp_path: Path) -> Path:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")])
    return with_http(with_websocket(config, auth=AUTH), auth=AUTH)


async def test_a_token_from_the_command_opens_websocket_and_http_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = gateway_with_auth(tmp_path)
    made = await trio.to_thread.run_sync(
        lambda: token_command(config, "--sub", "alice", "--ttl", "15m", "--scope", "tools:call notes:read")
    )
    assert made.returncode == 0 and made.stderr == ""
    token = made.stdout.removesuffix("\n")
    assert "\n" not in token  # the token alone, for $(mcp-gateway token ...)
    claims = jwt.decode(
        token, SECRET, algorithms=["HS256"], audience="mcp-gateway", issuer="https://ops.example"
    )
    assert claims["sub"] == "alice" and claims["exp"] - claims["iat"] == 15 * 60
    assert claims["scope"] == "tools:call notes:read"
    monkeypatch.setenv(VARIABLE, SECRET)
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        with trio.fail_after(DEADLINE_S):
            bearer = [("authorization", f"Bearer {token}")]
            async with websocket_client(gateway.websocket_url, bearer) as client:
                answer = await client.call_tool("echo", {"text": "over a websocket"})
                assert answer.content[0].text == "over a websocket"  # type: ignore[union-attr]
            http = httpx2.AsyncClient(headers=dict(bearer))
            async with (
                http,
                Client(streamable_http_client(gateway.http_url, http_client=http), mode=LEGACY_ERA) as client,
            ):
                answer = await client.call_tool("echo", {"text": "over http"})
                assert answer.content[0].text == "over http"  # type: ignore[union-attr]
            async with httpx2.AsyncClient() as anonymous:
                refused = await anonymous.post(gateway.http_url, json={})
            assert refused.status_code == 401  # the listener does check tokens


def test_a_missing_secret_bad_ttl_or_key_file_listener_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = gateway_with_auth(tmp_path)
    unset = token_command(config, "--sub", "alice", secret=None)
    assert (unset.returncode, unset.stdout) == (2, "")
    assert unset.stderr == (
        f"{config}: websocket.auth.jwt_secret_env: environment variable {VARIABLE} is not set or empty\n"
    )
    bad_ttl = token_command(config, "--sub", "alice", "--ttl", "1 hour")
    assert (bad_ttl.returncode, bad_ttl.stdout) == (2, "")
    assert bad_ttl.stderr.count("\n") == 1 and "--ttl '1 hour'" in bad_ttl.stderr
    keyed = tmp_path / "keyed.toml"
    (tmp_path / "gw.pem").write_text("-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n")
    keyed.write_text(
        MINIMAL + '[http]\nport = 0\n[http.auth]\njwt_public_key_file = "gw.pem"\n', encoding="utf-8"
    )
    public = token_command(keyed, "--sub", "alice")
    assert (public.returncode, public.stdout) == (2, "") and public.stderr.count("\n") == 1
    assert public.stderr.startswith(f"{keyed}: http.auth: verifies RS256/ES256 tokens")
    open_door = tmp_path / "open.toml"
    open_door.write_text(MINIMAL + "[http]\nport = 0\n", encoding="utf-8")
    none = token_command(open_door, "--sub", "alice")
    assert (none.returncode, none.stdout) == (2, "") and "no listener takes a token" in none.stderr
    assert "add [http.auth] with jwt_secret_env" in none.stderr and "config/auth.toml" in none.stderr


def test_the_listener_is_asked_for_when_the_two_auth_tables_differ(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha")])
    with_http(with_websocket(config, auth=AUTH), auth={**AUTH, "audience": "http-only"})
    ambiguous = token_command(config, "--sub", "alice")
    assert ambiguous.returncode == 2 and "pass --listener websocket or --listener http" in ambiguous.stderr
    chosen = token_command(config, "--sub", "alice", "--listener", "http")
    assert chosen.returncode == 0
    assert (
        jwt.decode(chosen.stdout.strip(), SECRET, algorithms=["HS256"], audience="http-only")["sub"]
        == "alice"
    )


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h", 3600), ("7d", 604800)])
def test_ttl_takes_seconds_minutes_hours_and_days(text: str, seconds: int) -> None:
    assert parse_ttl(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "1", "h", "0s", "-1h", "1.5h", "1y", "1H", "367d", "9" * 40 + "s", "1h\n", "\uff11h"]
)
def test_ttl_refuses_anything_else(text: str) -> None:
    with pytest.raises(TokenError):
        parse_ttl(text)


def test_scopes_may_be_repeated_or_space_separated_and_must_be_printable_ascii() -> None:
    assert parse_scopes(["a b", "c", "a"]) == "a b c"
    assert parse_scopes([]) == ""
    for bad in ['quo"te', "back\\slash", "tab\there", "new\nline", "é"]:
        with pytest.raises(TokenError):
            parse_scopes([bad])


async def test_the_shipped_auth_config_serves_only_tokens_its_own_command_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # config/auth.toml as its header says to use it, on free ports: a token from `mcp-gateway token`
    # (its default --config from MCP_GATEWAY_CONFIG, as in the container image) opens a session.
    shipped = (ROOT / "config" / "auth.toml").read_text(encoding="utf-8")
    config = tmp_path / "auth.toml"
    config.write_text(re.sub(r"(?m)^port = \d+", "port = 0", shipped), encoding="utf-8")
    env = {**os.environ, "MCP_GATEWAY_JWT_SECRET": SECRET, "MCP_GATEWAY_CONFIG": str(config)}
    argv = [sys.executable, "-m", "actors", "token", "--sub", "alice"]
    made = await trio.to_thread.run_sync(
        lambda: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    )
    monkeypatch.setenv("MCP_GATEWAY_JWT_SECRET", SECRET)
    async with running(config) as gateway:
        assert gateway.http_url is not None
        async with httpx2.AsyncClient() as anonymous:
            assert (await anonymous.post(gateway.http_url, json={})).status_code == 401
        headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(gateway.http_url, http_client=http), mode=LEGACY_ERA) as client,
            ):
                assert "calculate" in {tool.name for tool in (await client.list_tools()).tools}
