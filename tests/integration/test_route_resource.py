"""A route as an OAuth protected resource of its own, through a real gateway and a real identity provider
(nanoidp): its Protected Resource Metadata at /.well-known/oauth-protected-resource/<route path> on both
listeners, 401 challenges that point there, the route's required scopes (403), tokens bound to it (a
token for the route is no token for the listener's whole catalog; the listener's is good at its routes),
and tool_scopes judged by the catalog's name of a tool the route renames."""

from __future__ import annotations

from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import httpx2
import pytest
import trio
from mcp.shared.exceptions import MCPError
from nanoidp_fixture import nanoidp
from oauth_support import POST_HEADERS, http_client, listed
from support import DEADLINE_S, INITIALIZE, backend_entry, running, write_config

CLIENTS: Final = {
    "full-app": ("notes:read", "tools:echo", "tools:add"),
    "echo-app": ("notes:read", "tools:echo"),
    "plain-app": ("tools:echo", "tools:add"),
}
ROUTE: Final = """
[[routes]]
name = "calc"
paths = ["/calc"]
include = ["echo", "add"]
[routes.tools.add]
name = "plus"
[routes.auth]
scopes_supported = ["notes:read", "tools:echo", "tools:add"]
required_scopes = ["notes:read"]
"""


def route_config(folder: Path, issuer: str) -> Path:
    config = write_config(folder / "gateway.toml", [backend_entry("alpha", "--only=echo,add")])
    text = ""
    for table in ("http", "websocket"):
        text += (
            f"\n[{table}]\nport = 0\n[{table}.auth]\n"
            'scopes_supported = ["tools:echo", "tools:add"]\n'
            'tool_scopes = { echo = ["tools:echo"], add = ["tools:add"] }\n'
            f'[[{table}.auth.issuers]]\nissuer = "{issuer}"\n'
        )
    config.write_text(config.read_text() + text + ROUTE)
    return config


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def test_a_route_is_a_protected_resource_of_its_own(tmp_path: Path) -> None:
    async with (
        nanoidp(tmp_path / "idp", CLIENTS) as idp,
        running(route_config(tmp_path, idp.issuer)) as gateway,
        httpx2.AsyncClient() as http,
    ):
        assert gateway.http_url is not None and gateway.websocket_url is not None
        base, calc = origin(gateway.http_url), origin(gateway.http_url) + "/calc"
        with trio.fail_after(DEADLINE_S):
            document = (await http.get(f"{base}/.well-known/oauth-protected-resource/calc")).json()
            assert document["resource"] == calc
            assert document["authorization_servers"] == [idp.issuer]
            assert document["scopes_supported"] == ["notes:read", "tools:echo", "tools:add"]
            ws_port = urlsplit(gateway.websocket_url).port
            on_ws = await http.get(f"http://127.0.0.1:{ws_port}/.well-known/oauth-protected-resource/calc")
            assert on_ws.json()["resource"] == origin(gateway.websocket_url) + "/calc"
            listener = (await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")).json()
            assert listener["resource"] == gateway.http_url  # the listener's own is unchanged
            nowhere = await http.get(f"{base}/.well-known/oauth-protected-resource/elsewhere")
            assert nowhere.status_code == 404

            refused = await http.post(calc, json=INITIALIZE, headers=POST_HEADERS)
            assert refused.status_code == 401
            challenge = refused.headers["www-authenticate"]
            assert 'resource_metadata="http://' in challenge and "/oauth-protected-resource/calc" in challenge
            assert 'scope="notes:read"' in challenge

            full = await idp.token("full-app", calc, "notes:read tools:echo tools:add")
            async with http_client(calc, full) as client:
                assert await listed(client) == {"echo", "plus"}
                assert (await client.call_tool("plus", {"a": 2, "b": 3})).content[0].text == "5"  # type: ignore[union-attr]
            elsewhere = await http.post(  # bound to the route: no token for the whole catalog
                gateway.http_url,
                json=INITIALIZE,
                headers={**POST_HEADERS, "authorization": f"Bearer {full}"},
            )
            assert elsewhere.status_code == 401 and "invalid_token" in elsewhere.headers["www-authenticate"]

            echo_only = await idp.token("echo-app", calc, "notes:read tools:echo")
            async with http_client(calc, echo_only) as client:  # "plus" is add: its scope, by its own name
                assert await listed(client) == {"echo"}
                with pytest.raises(MCPError, match="Unknown tool: plus"):
                    await client.call_tool("plus", {"a": 2, "b": 3})

            whole = await idp.token("plain-app", gateway.http_url, "tools:echo tools:add")
            async with http_client(gateway.http_url, whole) as client:
                assert await listed(client) == {"echo", "add"}
            lacking = await http.post(  # the listener's token is good at its routes, with their scopes
                calc, json=INITIALIZE, headers={**POST_HEADERS, "authorization": f"Bearer {whole}"}
            )
            assert lacking.status_code == 403
            assert 'error="insufficient_scope"' in lacking.headers["www-authenticate"]
