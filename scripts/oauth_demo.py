"""An OAuth quick-start on this machine (scripts/oauth-demo): a real identity provider (nanoidp, from PyPI,
run offline) issues client-credentials tokens, and the gateway, configured as a resource server of that
provider, serves the demo backends to holders of those tokens only.

It prints the gateway config it wrote, gets a token as a client would (POST /token with the
client_credentials grant and the gateway's resource URL as `resource`), shows that a request without a token
gets 401 with the provider named in the metadata, lists the tools with the token, and then (without --once)
keeps both running until Ctrl-C, printing the curl lines to try by hand."""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

import httpx2
import trio

ROOT: Final = Path(__file__).resolve().parent.parent
CLIENT_ID: Final = "demo-client"  # what `nanoidp init` creates, with this secret
CLIENT_SECRET: Final = "demo-secret"
START_S: Final = 60.0
ACCEPT: Final = "application/json, text/event-stream"
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "demo", "version": "0"},
    },
}


def gateway_config(port: int, issuer: str) -> str:
    return f"""# Written by scripts/oauth-demo: the demo backends behind tokens of the provider at {issuer}.
[[backends]]
name = "notes"
command = "python"
args = ["-m", "mcp_gateway_examples.notes", "--db", "notes.sqlite3"]

[[backends]]
name = "utility"
command = "python"
args = ["-m", "mcp_gateway_examples.utility"]

[http]
host = "127.0.0.1"
port = {port}
path = "/mcp"

[http.auth]
resource = "http://127.0.0.1:{port}/mcp"   # what tokens must name as their audience (RFC 8707 `resource`)

[[http.auth.issuers]]
issuer = "{issuer}"   # keys found through its OpenID Connect discovery document
"""


async def start(argv: list[str], cwd: Path, ready: re.Pattern[bytes], what: str) -> trio.Process:
    """A process whose stderr says `ready` once it serves; its stderr then drained into ours."""
    process = await trio.lowlevel.open_process(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    seen = b""
    with trio.fail_after(START_S):
        while ready.search(seen) is None:
            chunk = await process.stderr.receive_some(65536)
            if not chunk:
                raise SystemExit(
                    f"oauth-demo: {what} exited before serving:\n{seen.decode(errors='replace')}"
                )
            seen += chunk
    return process


async def drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(65536):
        pass


async def stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def demo(folder: Path, idp_port: int, port: int, once: bool) -> int:
    python = sys.executable
    await trio.run_process([python, "-m", "nanoidp", "init", str(folder / "idp")], capture_stdout=True)
    settings = folder / "idp" / "settings.yaml"
    issuer = f"http://127.0.0.1:{idp_port}"
    text = settings.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^  port: \d+", f"  port: {idp_port}", text, count=1)
    text = re.sub(r'(?m)^  issuer: "[^"]*"', f'  issuer: "{issuer}"', text, count=1)
    settings.write_text(text, encoding="utf-8")
    config = folder / "gateway.toml"
    config.write_text(gateway_config(port, issuer), encoding="utf-8")
    print(f"== the gateway's config ({config})\n{config.read_text()}", flush=True)
    idp_argv = [python, "-m", "nanoidp", "--config", str(folder / "idp"), "--host", "127.0.0.1"]
    idp = await start(
        [*idp_argv, "--port", str(idp_port)], folder / "idp", re.compile(rb"Running on"), "nanoidp"
    )
    gateway_argv = [python, "-m", "actors", "serve", "--config", str(config)]
    try:
        gateway = await start(gateway_argv, folder, re.compile(rb"listening on http://"), "the gateway")
    except BaseException:
        await stop(idp)
        raise
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with trio.open_nursery() as nursery:
            for process in (idp, gateway):
                assert process.stderr is not None
                nursery.start_soon(drain, process.stderr)
            async with httpx2.AsyncClient(timeout=30) as http:
                await show(http, issuer, url)
            if not once:
                print("== both run until Ctrl-C", flush=True)
                await trio.sleep_forever()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stop(gateway)
            await stop(idp)
    return 0


async def show(http: httpx2.AsyncClient, issuer: str, url: str) -> None:
    headers = {"Accept": ACCEPT}
    refused = await http.post(url, json=INITIALIZE, headers=headers)
    print(f"== without a token: HTTP {refused.status_code}")
    print(f"   WWW-Authenticate: {refused.headers.get('www-authenticate')}")
    form = {"grant_type": "client_credentials", "resource": url}
    answer = await http.post(f"{issuer}/token", data=form, auth=(CLIENT_ID, CLIENT_SECRET))
    answer.raise_for_status()
    token = answer.json()["access_token"]
    print(f"== a token from {issuer}/token (client_credentials, resource={url}):\n{token}")
    headers["Authorization"] = f"Bearer {token}"
    opened = await http.post(url, json=INITIALIZE, headers=headers)
    opened.raise_for_status()
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    headers["Mcp-Protocol-Version"] = "2025-11-25"
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    listed = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
    listed.raise_for_status()
    names = [tool["name"] for tool in listed.json()["result"]["tools"]]
    print(f"== with it, tools/list: {', '.join(names)}")
    print(
        "== try it yourself:\n"
        f"TOKEN=$(curl -s -u {CLIENT_ID}:{CLIENT_SECRET} -d grant_type=client_credentials"
        f" -d resource={url} {issuer}/token | python3 -c 'import json,sys; print(json.load(sys.stdin)"
        '["access_token"])\')\n'
        f"curl -s {url} -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json'"
        f' -H \'Accept: {ACCEPT}\' -d \'{{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
        '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}\'',
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/oauth-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--idp-port", type=int, default=9400, help="the identity provider's port (9400)")
    parser.add_argument("--port", type=int, default=8766, help="the gateway's Streamable HTTP port (8766)")
    parser.add_argument("--once", action="store_true", help="stop after listing the tools")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oauth-demo-") as folder:
        try:
            return trio.run(demo, Path(folder), args.idp_port, args.port, args.once)
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())
