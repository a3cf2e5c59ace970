"""The canary sweep (issue #35): a unique canary in every secret source the gateway has, a real gateway
process driven by the SDK's client over Streamable HTTP, and then every place the gateway keeps or shows
text is searched for each canary: zero hits.

Sources: a backend's env secret from the gateway's environment (`{ env }`), from a file (`{ file }`) and
written in the config (`{ value }`); a remote backend's header secret; the admin listener's token; the OTLP
exporter's header variable; a token the gateway's token broker was granted at run time (minted: the test's
token service grants the canary itself to a client_credentials backend, whose server quotes it back in an
error). Two stdio backends get the env secrets and misbehave with them: they print them
to stderr (as ERROR lines, the ones the status page keeps), put them in a result, an isError result, a
JSON-RPC error and a log notification, and one crashes with them in its last stderr lines while
expose_backend_stderr shows those to clients. The client also sends one in a call's arguments.

Sinks: the log file and the gateway's stderr (text and JSON, one run each), the audit database (arguments
kept), /status, /readyz and /metrics, the /events stream, the OTLP export as posted, /proc/PID/cmdline of
the gateway and every process under it, and every error text the client got.

Markers (`[REDACTED:env:...]`) must show up where the canaries were headed: a sweep that finds nothing
because nothing leaked towards the sinks proves nothing.

"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import orjson
import pytest
import trio
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from otlp_receiver import Receiver, otlp_receiver
from recording_backend import Recorded, recording_backend
from sts_fixture import CLIENT_ID, CLIENT_SECRET, Sts, security_token_service
from support import DEADLINE_S, ROOT, TEST_BACKEND, stop_process, toml_value

from actors.backends import descendants
from actors.runtime.redact import marker

URL_LINES: Final = {
    "http": re.compile(rb"listening on (http://[^\s\"]+)"),
    "admin": re.compile(rb"admin listener on (http://[^\s\"]+)"),
}
# What the redactor puts in place of each backend secret (the literal is named by the key of one of the
# two backends that hold it)
MARKERS: Final = {
    "env": marker("env:GW_CANARY_ENV").encode(),
    "file": marker("file:canary.txt").encode(),
    "literal": marker("value:backends[").encode().removesuffix(b"]"),
}
# What stands in for a remote backend's credential its server quotes back in an error: the header secret, and
# the token minted for the other one (known to the redactor as it was granted, by no shape)
QUOTED: Final = {
    "header": marker("env:GW_CANARY_HEADER").encode(),
    "minted": marker("token:minted").encode(),
}


def canaries() -> dict[str, str]:
    """A unique value per secret source (each long enough for the redactor, and in no other text)."""
    sources = ("env", "file", "literal", "header", "admin", "otlp", "minted")
    return {source: f"canary-{source}-{secrets.token_hex(12)}" for source in sources}


def config(folder: Path, canary: dict[str, str], web: str, minted: str, receiver: Receiver, sts: Sts) -> Path:
    (folder / "canary.txt").write_text(canary["file"] + "\n")
    (folder / "canary.txt").chmod(0o600)
    env = {
        "CANARY_ENV": {"env": "GW_CANARY_ENV"},
        "CANARY_FILE": {"file": "canary.txt"},
        "CANARY_LITERAL": {"value": canary["literal"]},
    }
    backend = [sys.executable, str(TEST_BACKEND), "--env-to-stderr", "CANARY_"]
    lines = [
        "[gateway]",
        "expose_backend_stderr = true",
        'block_secrets = "block"',
        "[[backends]]",
        'name = "leaky"',
        f"command = {toml_value(backend[0])}",
        f"args = {toml_value([*backend[1:], '--name', 'leaky', '--only', 'echo,leak_env'])}",
        f"env = {toml_value(env)}",
        "[[backends]]",
        'name = "crashy"',
        f"command = {toml_value(backend[0])}",
        f"args = {toml_value([*backend[1:], '--name', 'crashy', '--only', 'crash'])}",
        f"env = {toml_value(env)}",
        "[backends.restart]",
        'policy = "temporary"',
        "[[backends]]",
        'name = "web"',
        f'url = "http://{web}/mcp"',
        'headers = { Authorization = { env = "GW_CANARY_HEADER" } }',
        "[[backends]]",
        'name = "minted"',
        f'url = "http://{minted}/mcp"',
        f"auth = {toml_value(minted_auth(sts))}",
        "[http]",
        "port = 0",
        "[admin]",
        "port = 0",
        'token_env = "GW_ADMIN_TOKEN"',
        "[audit]",
        'path = "audit.sqlite3"',
        "include_arguments = true",
        "[tracing]",
        f'endpoint = "{receiver.url}"',
        'service_name = "sweep"',
    ]
    path = folder / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def minted_auth(sts: Sts) -> dict[str, Any]:
    """The gateway's own token from the test's token service, in a header the bearer shape does not match:
    only the redactor's knowledge of what it minted can take it out."""
    secret = {"env": "GW_STS_SECRET"}
    return {
        "kind": "client_credentials",
        "token_url": sts.url,
        "client_id": CLIENT_ID,
        "client_secret": secret,
        "format": "Token {token}",
    }


@attrs.define
class GatewayProcess:
    """The gateway as a process of its own: its URLs (announced on stderr) and all it wrote there."""

    process: trio.Process
    stderr: bytearray = attrs.field(factory=bytearray)
    urls: dict[str, str] = attrs.field(factory=dict)
    _announced: trio.Event = attrs.field(factory=trio.Event)

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some(65536):
            self.stderr += chunk
            for name, pattern in URL_LINES.items():
                found = pattern.search(self.stderr)
                if found and name not in self.urls:
                    self.urls[name] = found.group(1).decode()
            if self.urls.keys() == URL_LINES.keys():
                self._announced.set()

    async def announced(self) -> None:
        with trio.fail_after(DEADLINE_S):
            await self._announced.wait()


@asynccontextmanager
async def gateway(config: Path, log_format: str, env: dict[str, str]) -> AsyncIterator[GatewayProcess]:
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config)]
    argv += ["--log-file", str(config.parent / "gateway.log"), "--log-format", log_format]
    process = await trio.lowlevel.open_process(
        argv, stdin=-1, stdout=-1, stderr=-1, cwd=str(ROOT), env={**os.environ, **env}
    )
    running = GatewayProcess(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(running.read_stderr)
            await running.announced()
            yield running
            process.send_signal(signal.SIGTERM)  # a clean stop: the spans still queued are exported
            with trio.fail_after(DEADLINE_S):
                await process.wait()
    finally:
        await stop_process(process)


@attrs.define
class Admin:
    url: str
    token: str

    async def get(self, path: str) -> str:
        async with httpx2.AsyncClient(timeout=DEADLINE_S) as http:
            response = await http.get(self.url + path, headers={"authorization": f"Bearer {self.token}"})
        assert response.status_code in (200, 503), response.text
        return response.text

    async def events_until(self, done: Callable[[dict[str, Any]], bool]) -> list[str]:
        """Every event of /events (as sent) until a status for which `done` is true."""
        seen: list[str] = []
        headers = {"authorization": f"Bearer {self.token}"}
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(timeout=DEADLINE_S) as http,
                http.stream("GET", self.url + "/events", headers=headers) as response,
            ):
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        seen.append(line)
                        if done(orjson.loads(line[6:])["status"]):
                            return seen
        raise AssertionError("the event stream ended")


def state_of(status: dict[str, Any], name: str) -> str:
    return next(backend["state"] for backend in status["backends"] if backend["name"] == name)  # type: ignore[no-any-return]


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The error text (message and data) a call got: each of these calls must fail."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool(tool, arguments)
    return f"{caught.value.message} {orjson.dumps(caught.value.data).decode()}"


async def drive(client: Client) -> list[str]:
    """Every way the backends leak their secrets, and one the client tries; the error texts it got."""
    texts = [
        await refused(client, "leak_env", {"prefix": "CANARY_", "how": how})
        for how in ("result", "tool_error", "error", "stderr", "log")
    ]
    assert (await client.call_tool("seen_by_web", {})).content[0].text == "web was called"  # type: ignore[union-attr]
    texts.append(await refused(client, "leak_auth_web", {}))  # its server quotes its header secret
    texts.append(await refused(client, "leak_auth_minted", {}))  # and the token minted for it
    return texts


def cmdlines(pid: int) -> list[bytes]:
    """/proc/PID/cmdline of the gateway and of every process under it."""
    family = descendants.Family(pid)
    family.note()
    found = []
    for each in (pid, *family.seen):
        try:
            found.append(Path(f"/proc/{each}/cmdline").read_bytes())
        except OSError:
            continue
    assert len(found) >= 3, "the gateway and its two stdio backends"
    return found


def audit_rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        calls = db.execute("SELECT * FROM calls").fetchall()
        return [*calls, *db.execute("SELECT * FROM token_requests").fetchall()]


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_no_canary_reaches_any_sink(tmp_path: Path, log_format: str) -> None:
    canary = canaries()
    env = {
        "GW_CANARY_ENV": canary["env"],
        "GW_CANARY_HEADER": canary["header"],
        "GW_ADMIN_TOKEN": canary["admin"],
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-canary={canary['otlp']}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "GW_STS_SECRET": CLIENT_SECRET,
    }
    sinks: dict[str, list[bytes]] = {}
    client_texts: list[str] = []
    web_seen = Recorded()
    with otlp_receiver() as receiver:
        async with (
            security_token_service() as sts,
            recording_backend("web") as (web, web_seen),
            recording_backend("minted") as (minted, minted_seen),
        ):
            sts.opaque, sts.expires_in = canary["minted"], 3600  # the token it grants is the canary
            path = config(tmp_path, canary, web, minted, receiver, sts)
            async with gateway(path, log_format, env) as running:
                admin = Admin(running.urls["admin"], canary["admin"])
                with trio.fail_after(DEADLINE_S * 2):
                    async with Client(streamable_http_client(running.urls["http"]), mode="legacy") as client:
                        await client.list_tools()  # held until every backend is up: all three processes run
                        sinks["cmdline"] = cmdlines(running.process.pid)
                        client_texts += await drive(client)
                        client_texts.append(await refused(client, "echo", {"text": f"my {canary['env']}"}))
                        client_texts.append(await refused(client, "crash", {}))  # its stderr, shown
                        events = await admin.events_until(
                            lambda status: state_of(status, "crashy") != "ready"
                        )
                        client_texts.append(await refused(client, "crash", {}))  # down: why, with stderr
                        sinks["/status"] = [(await admin.get("/status")).encode()]
                        sinks["/readyz"] = [(await admin.get("/readyz")).encode()]
                        sinks["/metrics"] = [(await admin.get("/metrics")).encode()]
                        sinks["/events"] = [line.encode() for line in events]
            sinks["stderr"] = [bytes(running.stderr)]
        sinks["log file"] = [(tmp_path / "gateway.log").read_bytes()]
        sinks["audit"] = [repr(row).encode() for row in audit_rows(tmp_path / "audit.sqlite3")]
        sinks["otlp"] = list(receiver.bodies)
    sinks["client errors"] = [text.encode() for text in client_texts]

    leaks = {
        (sink, source): sum(text.count(value.encode()) for text in texts)
        for sink, texts in sinks.items()
        for source, value in canary.items()
    }
    leaked = sorted(f"{source} in {sink}" for (sink, source), hits in leaks.items() if hits)
    assert not leaked, "canaries found: " + ", ".join(leaked)

    # The canaries went where the sinks are, and were taken out there, not just never sent.
    assert any(canary["header"] == headers.get("authorization") for headers in web_seen.headers)
    assert any(f"Token {canary['minted']}" == headers.get("authorization") for headers in minted_seen.headers)
    assert all(any(each in text for text in sinks["client errors"]) for each in QUOTED.values())
    log_text = sinks["log file"][0]
    assert all(each in log_text for each in MARKERS.values())
    assert all(each in sinks["/status"][0] for each in MARKERS.values())
    assert any(MARKERS["env"] in text for text in sinks["client errors"])  # the JSON-RPC error, the stderr
    assert b"block_secrets: result holds" in b"".join(sinks["audit"])
    assert b"block_secrets: arguments hold" in b"".join(sinks["audit"])
    assert any(MARKERS["env"] in row for row in sinks["audit"])  # the arguments, kept
    assert any(b"[REDACTED:" in body for body in sinks["otlp"])  # a span's error message
    if log_format == "json":
        assert all(orjson.loads(line) for line in log_text.splitlines())  # still JSON, every line
