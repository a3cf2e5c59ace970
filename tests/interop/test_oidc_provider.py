"""A second, stricter identity provider: panva's oidc-provider (npm, a certified OpenID provider) issuing
RFC 9068 JWT access tokens (`typ: at+jwt`) with resource indicators. The gateway finds its keys through
discovery, an SDK client with its token calls a tool (seeing only the tools its scope covers), and the opaque
token it issues when no resource is named is refused (a resource it does not serve gets no token at all)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Final

import httpx2
import jwt
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth_support import POST_HEADERS, free_port
from support import (
    DEADLINE_S,
    INITIALIZE,
    LEGACY_ERA,
    backend_entry,
    drain,
    running,
    search_stream,
    stop_process,
    write_config,
)

SCRIPT: Final = Path(__file__).parent / "oidc_issuer.mjs"
SECRET: Final = "oidc-provider-test-secret"


async def token_for(issuer: str, resource: str | None) -> str:
    form = {"grant_type": "client_credentials", "scope": "tools:echo"}
    if resource is not None:
        form["resource"] = resource
    async with httpx2.AsyncClient() as http:
        answer = await http.post(f"{issuer}/token", data=form, auth=("carol-app", SECRET))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


async def test_oidc_provider_jwt_access_tokens_are_accepted_and_its_other_tokens_refused(
    tmp_path: Path, node: Path
) -> None:
    port, gateway_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{gateway_port}/mcp"
    issuer = f"http://127.0.0.1:{port}"
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo,add")])
    config.write_text(
        config.read_text()
        + f'\n[http]\nport = {gateway_port}\n[http.auth]\ntool_scopes = {{ add = ["tools:add"] }}\n'
        + f'[[http.auth.issuers]]\nissuer = "{issuer}"\n'
    )
    process = await trio.lowlevel.open_process(
        [str(node), str(SCRIPT), str(port), resource], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    try:
        async with trio.open_nursery() as nursery:
            await search_stream(process.stdout, re.compile(rb"listening on (\S+)"), "oidc-provider listening")
            nursery.start_soon(drain, process.stdout)
            async with running(config) as gateway:
                assert gateway.http_url == resource
                token = await token_for(issuer, resource)
                assert jwt.get_unverified_header(token)["typ"] == "at+jwt"
                with trio.fail_after(DEADLINE_S):
                    async with (
                        httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http,
                        Client(streamable_http_client(resource, http_client=http), mode=LEGACY_ERA) as client,
                    ):
                        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo"}
                        answer = await client.call_tool("echo", {"text": "strict"})
                        assert answer.content[0].text == "strict"  # type: ignore[union-attr]
                    async with httpx2.AsyncClient() as http:
                        elsewhere = await http.post(
                            f"{issuer}/token",
                            data={"grant_type": "client_credentials", "resource": "http://127.0.0.1:9/mcp"},
                            auth=("carol-app", SECRET),
                        )
                    assert elsewhere.json()["error"] == "invalid_target"
                    opaque = await token_for(issuer, None)  # no resource named: an opaque token
                    assert opaque.count(".") != 2
                    async with httpx2.AsyncClient() as http:
                        refused = await http.post(
                            resource,
                            json=INITIALIZE,
                            headers={**POST_HEADERS, "authorization": f"Bearer {opaque}"},
                        )
                    assert refused.status_code == 401
                    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
            nursery.cancel_scope.cancel()
    finally:
        await stop_process(process)
