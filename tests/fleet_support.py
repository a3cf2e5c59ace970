"""What the fleet tier's tests and scripts/fleet share: free ports and a real redis-server process."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, Final, Protocol

import httpx2
import orjson
import trio
from support import DEADLINE_S, INITIALIZE, backend_entry, running, toml_value, with_http, write_config
from tls_certs import Pki


class ServerStartError(Exception):
    """redis-server (or PostgreSQL) did not start: its exit code and last lines."""


def free_port() -> int:
    """A port free on loopback now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """A redis-server on a free loopback port, nothing saved to disk; stop() and start() again on the same
    port (for the tests of a Redis that goes away and comes back). With `tls`: that port speaks TLS only,
    with the server certificate of `tls` (and asks for a client certificate of its CA when
    `require_client`)."""

    ready_line: bytes = b"Ready to accept connections"  # its log line once it serves

    def __init__(
        self,
        binary: str,
        folder: Path,
        extra: tuple[str, ...] = (),
        *,
        tls: Pki | None = None,
        require_client: bool = False,
    ) -> None:
        self.binary, self.folder, self.port, self.extra = binary, folder, free_port(), extra
        self.tls, self.require_client = tls, require_client
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and return once it says it accepts connections (its own log line, read as it comes)."""
        self.process = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.process.stdout is not None
        seen = []
        for line in self.process.stdout:  # ends when it exits; a redis that neither starts nor exits hangs
            seen.append(line.decode(errors="replace").strip())
            if self.ready_line in line:
                threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
                return
        code = self.process.wait()
        raise ServerStartError(f"redis-server exited {code} on port {self.port}: {seen[-3:]}")

    def argv(self) -> list[str]:
        return [
            self.binary,
            *(
                tls_options(self.tls, self.port, self.require_client)
                if self.tls
                else ("--port", str(self.port))
            ),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--loglevel",
            "notice",
            *self.extra,
        ]

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    @staticmethod
    def _drain(stdout: IO[bytes]) -> None:
        """Its later log lines read and dropped, so a full pipe never stops it."""
        for _ in stdout:
            pass


def tls_options(tls: Pki, port: int, require_client: bool) -> list[str]:
    """redis-server's options for TLS only on `port`: its certificate, the CA it checks peers against, and
    whether a client must show a certificate. Its own links (replication, cluster bus) show the client
    certificate: the server's is for serverAuth only."""
    return [
        *("--port", "0", "--tls-port", str(port)),
        *("--tls-cert-file", str(tls.server_certificate), "--tls-key-file", str(tls.server_key)),
        *("--tls-client-cert-file", str(tls.client_certificate)),
        *("--tls-client-key-file", str(tls.client_key), "--tls-ca-cert-file", str(tls.ca)),
        *("--tls-auth-clients", "yes" if require_client else "no"),
    ]


def fleet_tls(tls: Pki, *, client: bool = True) -> dict[str, str]:
    """[fleet]'s TLS keys for a Redis of `tls`: its CA, and (`client`) the client certificate."""
    keys = {"redis_ca_file": str(tls.ca)}
    if client:
        keys |= {"redis_cert_file": str(tls.client_certificate), "redis_key_file": str(tls.client_key)}
    return keys


FLEET_KEYS: Final = (
    "a" * 43,  # 32 bytes as base64url: test keys, never a real fleet's
    "b" * 64,  # 32 bytes as hex
)


def with_fleet(config: Path, redis_url: str, replica: str, **settings: Any) -> Path:
    """Append a [fleet] table naming this Redis and replica, with the keys in a file beside the config."""
    keys = config.parent / "fleet.keys"
    if not keys.exists():
        keys.write_text("\n".join(settings.pop("keys", FLEET_KEYS)) + "\n", encoding="ascii")
    settings = {"redis_url": redis_url, "replica": replica, "keys_file": str(keys), **settings}
    lines = ["", "[fleet]", *(f"{key} = {toml_value(value)}" for key, value in settings.items())]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")
    return config


class RoundRobin(httpx2.AsyncBaseTransport):
    """A client-side stand-in for a balancer with no stickiness: each request goes to the next replica's
    port, so a session's requests land on every replica in turn."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.turn = ports, 0
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[self.turn % len(self.ports)]
        self.turn += 1
        request.url = request.url.copy_with(port=port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class ByMessage(httpx2.AsyncBaseTransport):
    """A balancer with no stickiness that the test steers: each request goes to the port `route` picks for
    the JSON-RPC message it POSTs (None for a GET or DELETE), so a session's messages land where a test
    needs them (an answer on another replica than the request it answers, a notification elsewhere)."""

    def __init__(self, route: Callable[[dict[str, Any] | None], int]) -> None:
        self.route = route
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread() if request.method == "POST" else b""
        message = orjson.loads(body) if body else None
        request.url = request.url.copy_with(port=self.route(message if isinstance(message, dict) else None))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def kind_of(message: dict[str, Any] | None) -> str:
    """ "initialize", "request", "notification", "answer" (to a request of the gateway), or "other" (a GET,
    a DELETE)."""
    if message is None:
        return "other"
    if "method" not in message:
        return "answer"
    if "id" not in message:
        return "notification"
    return "initialize" if message["method"] == "initialize" else "request"


class Switch(httpx2.AsyncBaseTransport):
    """A balancer the test moves: every request goes to the port set now."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def port_of(gateway: Any) -> int:
    """The port of a running gateway's [http] listener."""
    assert gateway.http_url is not None
    return httpx2.URL(gateway.http_url).port or 80


HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class RedisLike(Protocol):
    """A Redis the replicas share: one server, a Sentinel service or a Cluster (tests/redis_topologies.py)."""

    @property
    def url(self) -> str: ...


def replica_config(
    folder: Path, redis: RedisLike, replica: str, fleet: dict[str, str] | None = None, **http: Any
) -> Path:
    """A replica's config: the test backend (with resources), an [http] listener (`http`: its keys) and
    [fleet] (with the keys of `fleet` too)."""
    folder.mkdir(exist_ok=True)
    config = with_http(write_config(folder / "g.toml", [backend_entry("t", "--resources")]), **http)
    return with_fleet(config, redis.url, replica, **(fleet or {}))


@asynccontextmanager
async def two_replicas(
    folder: Path, redis: RedisLike, fleet: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """Two running gateways, "alpha" and "beta", of `replica_config` sharing `redis` (with `fleet`'s keys)."""
    async with (
        running(replica_config(folder / "a", redis, "alpha", fleet)) as alpha,
        running(replica_config(folder / "b", redis, "beta", fleet)) as beta,
    ):
        with trio.fail_after(DEADLINE_S):  # both in the fleet: under load a first connection may time out,
            for replica in (alpha, beta):  # and a replica then rightly serves alone until Redis answers
                await replica.fleet.store.wait_available()
        yield alpha, beta


async def open_on(http: httpx2.AsyncClient, url: str, token: dict[str, str] | None = None) -> str:
    response = await http.post(url, json=INITIALIZE, headers={**HEADERS, **(token or {})})
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def delete_ends_it_on_both(alpha: Any, beta: Any, http: httpx2.AsyncClient) -> dict[str, str]:
    """A session opened on alpha, used on beta and deleted there: waits until alpha has heard (the fleet's
    notice) and ended its own copy. The session's headers, for what the caller checks next."""
    assert alpha.http_url and beta.http_url and alpha.fleet
    session_id = await open_on(http, alpha.http_url)
    own = {**HEADERS, "mcp-session-id": session_id}
    assert (await http.post(beta.http_url, json=echo(2, "taken up"), headers=own)).status_code == 200
    ended_on_alpha = trio.Event()
    end_local = alpha.fleet.sessions.end_local
    assert end_local is not None

    def ended(ended_id: str) -> None:
        end_local(ended_id)
        ended_on_alpha.set()

    alpha.fleet.sessions.end_local = ended
    assert (await http.delete(beta.http_url, headers=own)).status_code == 204
    with trio.fail_after(DEADLINE_S):
        await ended_on_alpha.wait()
    return own


def echo(request_id: int, text: str) -> dict[str, Any]:
    params = {"name": "echo", "arguments": {"text": text}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class PostgresServer:
    """A PostgreSQL server of the distribution's binaries, in a fresh cluster on a free loopback port, trust
    auth, run in the foreground as a child of the tests (as the postgres user when they run as root: it
    refuses root). Not daemonized with pg_ctl: a gateway run in the tests' process is a child subreaper
    and ends the orphans it adopts, which a daemonized postmaster would be."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir, self.port = bin_dir, free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="mcp-gateway-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.folder, self.user)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """initdb, then the server; back once it says it accepts connections (its log line, as it comes)."""
        data = str(self.folder / "data")
        initdb = [str(self.bin_dir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"]
        done = subprocess.run(initdb, capture_output=True, text=True, timeout=120, check=False, **self._as())
        if done.returncode != 0:
            raise ServerStartError(f"initdb exited {done.returncode}: {done.stderr.strip()[-500:]}")
        argv = [str(self.bin_dir / "postgres"), "-D", data, "-p", str(self.port), "-k", str(self.folder)]
        argv += ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **self._as())
        assert self.process.stdout is not None
        seen = []
        for line in self.process.stdout:
            seen.append(line.decode(errors="replace").strip())
            if b"ready to accept connections" in line:
                threading.Thread(target=RedisServer._drain, args=(self.process.stdout,), daemon=True).start()
                return
        raise ServerStartError(f"postgres exited {self.process.wait()}: {seen[-3:]}")

    def stop(self) -> None:
        try:
            if self.process is not None:
                self.process.send_signal(signal.SIGQUIT)  # immediate shutdown: a test's data is not kept
                self.process.wait(timeout=30)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _as(self) -> dict[str, Any]:
        return (
            {"user": self.user, "group": self.user, "cwd": self.folder} if self.user else {"cwd": self.folder}
        )
