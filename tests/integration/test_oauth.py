"""The gateway as an OAuth 2.1 resource server, against a real identity provider (nanoidp): its tokens open
sessions on both network listeners, their scopes choose each principal's catalog, the official SDK client
finds the issuer from the 401 and the Protected Resource Metadata, a key rotation is followed without a
restart, and every token that is not for this gateway from a trusted issuer is refused with a challenge."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError
from nanoidp_fixture import SECRET, Idp, nanoidp
from oauth_support import CLIENTS, POST_HEADERS, TOOL_SCOPES, hmac_token, http_client, listed
from sdk_websocket import websocket_client
from support import DEADLINE_S, INITIALIZE, LEGACY_ERA, backend_entry, running, write_config
from trio_websocket import ConnectionRejected, open_websocket_url

from actors.gateway import Gateway


def oauth_config(folder: Path, issuer: str, *extra: str) -> Path:
    config = write_config(folder / "gateway.toml", [backend_entry("alpha", "--only=echo,add")])
    auth = [
        'scopes_supported = ["tools:echo", "tools:add"]',
        f"tool_scopes = {TOOL_SCOPES}",
        *extra,
        "[[{table}.auth.issuers]]",
        f'issuer = "{issuer}"',
    ]
    text = ""
    for table in ("http", "websocket"):
        text += f"\n[{table}]\nport = 0\n[{table}.auth]\n" + "\n".join(auth).replace("{table}", table) + "\n"
    config.write_text(config.read_text() + text)
    return config


@asynccontextmanager
async def gateway_and_idp(tmp_path: Path, *extra: str) -> AsyncIterator[tuple[Gateway, Idp]]:
    async with (
        nanoidp(tmp_path / "idp", CLIENTS) as idp,
        running(oauth_config(tmp_path, idp.issuer, *extra)) as gw,
    ):
        yield gw, idp


async def test_nanoidp_tokens_open_sessions_and_each_principal_sees_the_tools_its_scopes_cover(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        assert gateway.http_url is not None and gateway.websocket_url is not None
        with trio.fail_after(DEADLINE_S):
            alice = await idp.token("alice-app", gateway.http_url, "tools:echo tools:add")
            bob = await idp.token("bob-app", gateway.http_url, "tools:echo")
            async with http_client(gateway.http_url, alice) as client:
                assert await listed(client) == {"echo", "add"}
                answer = await client.call_tool("add", {"a": 2, "b": 3})
                assert answer.content[0].text == "5"  # type: ignore[union-attr]
            async with http_client(gateway.http_url, bob) as client:
                assert await listed(client) == {"echo"}
                with pytest.raises(MCPError, match="Unknown tool: add"):  # hidden: as if it did not exist
                    await client.call_tool("add", {"a": 2, "b": 3})
            ws_bob = await idp.token("bob-app", gateway.websocket_url, "tools:echo")
            async with websocket_client(
                gateway.websocket_url, [("authorization", f"Bearer {ws_bob}")]
            ) as client:
                assert await listed(client) == {"echo"}
            async with httpx2.AsyncClient() as http:  # a token for the WebSocket listener is not for HTTP
                answer = await http.post(
                    gateway.http_url,
                    json=INITIALIZE,
                    headers={**POST_HEADERS, "authorization": f"Bearer {ws_bob}"},
                )
            assert answer.status_code == 401


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_client_finds_the_issuer_from_the_401_and_the_metadata_and_calls_a_tool(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        assert gateway.http_url is not None
        storage = MemoryStorage()
        provider = ClientCredentialsOAuthProvider(
            server_url=gateway.http_url,
            storage=storage,
            client_id="alice-app",
            client_secret=SECRET,
            issuer=idp.issuer,
        )
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(auth=provider) as http,
                Client(streamable_http_client(gateway.http_url, http_client=http), mode=LEGACY_ERA) as client,
            ):
                answer = await client.call_tool("echo", {"text": "found my way"})
                assert answer.content[0].text == "found my way"  # type: ignore[union-attr]
        assert storage.tokens is not None
        claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
        assert claims["aud"] == gateway.http_url and claims["iss"] == idp.issuer


async def test_the_metadata_is_served_at_both_well_known_paths_and_every_401_points_to_it(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        assert gateway.http_url is not None
        origin = gateway.http_url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
            ):
                document = (await http.get(origin + path)).json()
                assert document["resource"] == gateway.http_url
                assert document["authorization_servers"] == [idp.issuer]
                assert document["scopes_supported"] == ["tools:echo", "tools:add"]
            anonymous = await http.post(gateway.http_url, json=INITIALIZE, headers=POST_HEADERS)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == (
            f'Bearer resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp", '
            'scope="tools:echo tools:add"'
        )


async def test_every_token_not_for_this_gateway_from_a_trusted_issuer_is_refused(tmp_path: Path) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        url = gateway.http_url
        assert url is not None
        folder = tmp_path / "idp" / "keys"
        private, kid = (folder / "rsa_private.pem").read_bytes(), (folder / "kid.txt").read_text().strip()
        now = int(time.time())
        claims = {
            "iss": idp.issuer,
            "sub": "mallory",
            "aud": url,
            "iat": now,
            "exp": now + 300,
            "scope": "tools:echo",
        }
        stranger = rsa.generate_private_key(65537, 2048)
        bad = {
            "another audience": await idp.token("alice-app", "http://127.0.0.1:1/mcp", "tools:echo"),
            "expired": jwt.encode({**claims, "exp": now - 120}, private, "RS256", {"kid": kid}),
            "untrusted issuer": jwt.encode(
                {**claims, "iss": "http://127.0.0.1:2"}, stranger, "RS256", {"kid": kid}
            ),
            "alg none": jwt.encode(claims, None, "none", {"kid": kid}),
            "hs256 with the public key": hmac_token(
                {"alg": "HS256", "typ": "JWT", "kid": kid}, claims, (folder / "rsa_public.pem").read_bytes()
            ),
            "a kid never published": jwt.encode(claims, stranger, "RS256", {"kid": "never-published"}),
            "a published kid, another key": jwt.encode(claims, stranger, "RS256", {"kid": kid}),
            "a subject that is no text": jwt.encode(
                {**claims, "sub": "\ud800"}, private, "RS256", {"kid": kid}
            ),
            "huge": "x" * 20000,
        }
        good = jwt.encode(claims, private, "RS256", {"kid": kid})  # the IdP's own key: the control case
        async with httpx2.AsyncClient() as http:
            for what, token in {**bad, "good": good}.items():
                answer = await http.post(
                    url, json=INITIALIZE, headers={**POST_HEADERS, "authorization": f"Bearer {token}"}
                )
                if what == "good":
                    assert answer.status_code == 200, answer.text
                    continue
                assert answer.status_code == 401, what
                challenge = answer.headers["www-authenticate"]
                assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge, what


async def test_a_rotated_key_is_followed_without_a_restart_and_sessions_stay_their_principals(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        url = gateway.http_url
        assert url is not None
        with trio.fail_after(DEADLINE_S):
            before = await idp.token("alice-app", url, "tools:echo tools:add")
            async with http_client(url, before) as client:
                assert await listed(client) == {"echo", "add"}
            new_kid = await idp.rotate()
            after = await idp.token("alice-app", url, "tools:echo")
            assert jwt.get_unverified_header(after)["kid"] == new_kid
            async with http_client(url, after) as client:
                assert await listed(client) == {"echo"}
            async with httpx2.AsyncClient() as http:
                opened = await http.post(
                    url, json=INITIALIZE, headers={**POST_HEADERS, "authorization": f"Bearer {before}"}
                )
                session = opened.headers["mcp-session-id"]
                bob = await idp.token("bob-app", url, "tools:echo")
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                for token, sid in ((bob, session), (before, "no-such-session")):
                    answer = await http.post(
                        url,
                        json=ping,
                        headers={**POST_HEADERS, "authorization": f"Bearer {token}", "mcp-session-id": sid},
                    )
                    assert answer.status_code == 404  # never 401: clients take 401 for an expired token


async def test_a_session_opened_with_a_broader_token_is_not_served_to_a_narrower_one(tmp_path: Path) -> None:
    """alice's token loses tools:add: a session opened while she had it does not go on granting it (404:
    her client opens a session of her present scopes); a token granting as much as the opener goes on."""
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        url = gateway.http_url
        assert url is not None
        broad = await idp.token("alice-app", url, "tools:echo tools:add")
        narrow = await idp.token("alice-app", url, "tools:echo")
        add = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {}}}
        headers = {**POST_HEADERS, "authorization": f"Bearer {broad}"}
        async with httpx2.AsyncClient() as http:
            opened = await http.post(url, json=INITIALIZE, headers=headers)
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            await http.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            again = await idp.token("alice-app", url, "tools:echo tools:add")  # refreshed, as broad
            ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
            kept = await http.post(url, json=ping, headers={**headers, "authorization": f"Bearer {again}"})
            narrowed = await http.post(
                url, json=add, headers={**headers, "authorization": f"Bearer {narrow}"}
            )
        assert kept.status_code == 200 and kept.json()["result"] == {}
        assert narrowed.status_code == 404, narrowed.text


async def test_a_call_the_token_scopes_do_not_cover_gets_403_insufficient_scope_when_asked_for(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path, 'insufficient_scope = "refuse"') as (gateway, idp):
        url = gateway.http_url
        assert url is not None
        bob = {**POST_HEADERS, "authorization": f"Bearer {await idp.token('bob-app', url, 'tools:echo')}"}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {}}}
        async with httpx2.AsyncClient() as http:
            opened = await http.post(url, json=INITIALIZE, headers=bob)
            bob["mcp-session-id"] = opened.headers["mcp-session-id"]
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=bob)
            refused = await http.post(url, json=call, headers=bob)
            echoed = await http.post(
                url, json={**call, "params": {"name": "echo", "arguments": {"text": "hi"}}}, headers=bob
            )
        assert refused.status_code == 403
        origin = url.removesuffix("/mcp")
        assert refused.headers["www-authenticate"] == (
            f'Bearer resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp", '
            'scope="tools:add", error="insufficient_scope"'
        )
        assert echoed.status_code == 200 and echoed.json()["result"]["content"][0]["text"] == "hi"


async def test_a_websocket_upgrade_without_a_good_token_is_refused_with_the_challenge_and_its_metadata(
    tmp_path: Path,
) -> None:
    async with gateway_and_idp(tmp_path) as (gateway, idp):
        assert gateway.websocket_url is not None and gateway.http_url is not None
        token = await idp.token("bob-app", gateway.websocket_url, "tools:echo")
        for headers in ([], [("authorization", "Bearer not.a.token")]):
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(
                    gateway.websocket_url, subprotocols=["mcp"], extra_headers=headers
                ):
                    pass
            assert refused.value.status_code == 401
            challenge = dict(refused.value.headers or [])[b"www-authenticate"].decode()
            port = gateway.websocket_url.split(":")[2].split("/")[0]
            assert challenge.startswith(
                f'Bearer resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"'
            )
            assert ('error="invalid_token"' in challenge) == bool(headers)
        metadata_url = challenge.split('"')[1]
        async with httpx2.AsyncClient() as http:  # served on the WebSocket listener's own port
            document = (await http.get(metadata_url)).json()
            bare = (await http.get(metadata_url.removesuffix("/mcp"))).json()
        assert document == bare and document["resource"] == gateway.websocket_url
        assert document["authorization_servers"] == [idp.issuer]
        async with websocket_client(gateway.websocket_url, [("authorization", f"Bearer {token}")]) as client:
            assert await listed(client) == {"echo"}  # the handshake still goes through the bytes read first
