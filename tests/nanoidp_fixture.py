"""A real OAuth 2 / OIDC identity provider for tests: nanoidp (PyPI), run offline as a process on a free
loopback port, its issuer set to that port. Clients get tokens with the client_credentials grant, `resource`
(RFC 8707) becoming the token's `aud`; `rotate()` makes it sign with a new key (the old one stays published).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import attrs
import httpx2
import trio
from oauth_support import free_port
from support import DEADLINE_S, drain, search_stream, stop_process

SECRET: Final = "nanoidp-test-secret"
SCOPES: Final = ("tools:echo", "tools:add", "notes:read")


@attrs.frozen
class Idp:
    issuer: str

    async def token(self, client_id: str, resource: str, scope: str | None = None) -> str:
        form = {"grant_type": "client_credentials", "resource": resource}
        if scope is not None:
            form["scope"] = scope
        async with httpx2.AsyncClient() as http:
            answer = await http.post(f"{self.issuer}/token", data=form, auth=(client_id, SECRET))
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    async def rotate(self) -> str:
        """A new signing key; the new key's id."""
        async with httpx2.AsyncClient() as http:
            answer = await http.post(f"{self.issuer}/api/keys/rotate")
        assert answer.status_code == 200, answer.text
        return str(answer.json()["new_kid"])


def _settings(port: int, clients: Mapping[str, tuple[str, ...]]) -> str:
    listed = "".join(
        f'    - client_id: "{client}"\n      client_secret: "{SECRET}"\n'
        f"      allowed_scopes: [{', '.join(repr(s) for s in scopes)}]\n"
        for client, scopes in clients.items()
    )
    return (
        f'server:\n  host: "127.0.0.1"\n  port: {port}\n'
        f'oauth:\n  issuer: "http://127.0.0.1:{port}"\n  audience: "unused"\n  token_expiry_minutes: 5\n'
        f"  scopes_supported: [{', '.join(repr(s) for s in SCOPES)}]\n"
        f"  clients:\n{listed}"
    )


def _configure(folder: Path, clients: Mapping[str, tuple[str, ...]]) -> int:
    """Its server and oauth settings (init's defaults kept for the rest); the port it is to listen on."""
    port = free_port()
    settings = folder / "settings.yaml"
    kept = settings.read_text().split("\nsaml:", 1)[1]
    settings.write_text(_settings(port, clients) + "\nsaml:" + kept)
    return port


@asynccontextmanager
async def nanoidp(folder: Path, clients: Mapping[str, tuple[str, ...]]) -> AsyncIterator[Idp]:
    """nanoidp serving `clients` (client id -> the scopes it may ask for), until the block ends."""
    await trio.run_process([sys.executable, "-m", "nanoidp", "init", str(folder)], capture_stdout=True)
    port = _configure(folder, clients)
    argv = [
        sys.executable,
        "-m",
        "nanoidp",
        "--config",
        str(folder),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    process = await trio.lowlevel.open_process(  # its keys are kept in ./keys
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=folder
    )
    assert process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(DEADLINE_S):
                await search_stream(
                    process.stderr, re.compile(rb"Running on (http://\S+)"), "nanoidp serving"
                )
            nursery.start_soon(drain, process.stderr)
            yield Idp(f"http://127.0.0.1:{port}")
            nursery.cancel_scope.cancel()
    finally:
        await stop_process(process)
