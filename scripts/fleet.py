"""A gateway fleet under load: N replicas, redis-server and HAProxy, and real SDK clients of both eras.

Every process is real: the replicas are `python -m actors serve` with config/fleet/replica.toml (its
[http] port set per replica), Redis is the distribution's redis-server, the balancer is HAProxy with
config/fleet/haproxy.cfg (sticky on Mcp-Session-Id; with --no-stick, no stickiness and round robin, so
each request of a session lands on the next replica) plus one `server` line per replica. The clients are
the official SDK's (mcp 2.3 `Client`): legacy ones hold one session each for the whole run, 2026-07-28
ones send each call on its own. Each call asks `calculate` for a sum only that call knows, so an answer
meant for another call is seen as wrong.

    scripts/fleet [--replicas N] [--seconds S] [--clients C] [--no-stick]
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

import attrs
import httpx2
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT: Final = Path(__file__).resolve().parent.parent
REPLICA_CONFIG: Final = ROOT / "config" / "fleet" / "replica.toml"
HAPROXY_CONFIG: Final = ROOT / "config" / "fleet" / "haproxy.cfg"
READY_S: Final = 30.0  # a process that does not listen by then has failed
CALL_S: Final = 30.0  # one call's longest wait: past it, an error
STICKINESS: Final = re.compile(r"(?m)^\s*stick(-table| store-response| match) .*\n")  # haproxy.cfg's
RECONNECT_S: Final = 0.2  # before a client that failed whole connects again (no hot loop on a dead port)
ERAS: Final = {"legacy": "legacy", "2026-07-28": "2026-07-28"}  # the table's name: the SDK Client's mode


class FleetStartError(Exception):
    """A part of the fleet did not start: which, and its last log lines."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    """Until `port` accepts a connection; FleetStartError when `process` exits or READY_S passes."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise FleetStartError(f"{what} exited {process.returncode}: {tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # a connection refused comes back at once: pace the next try
    raise FleetStartError(f"{what} did not listen on {port} within {READY_S:.0f}s: {tail(log)}")


def tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@attrs.define
class Fleet:
    """The processes of one run, each stopped (SIGTERM, then SIGKILL) when the run ends."""

    folder: Path
    redis_port: int = 0
    haproxy_port: int = 0
    replica_ports: list[int] = attrs.field(factory=list)
    sticky: bool = True  # HAProxy keeps a session on one replica; False: round robin, no stickiness
    processes: dict[str, subprocess.Popen[bytes]] = attrs.field(factory=dict)
    keys: str = attrs.field(
        factory=lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    )

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.folder)
        self.processes[name] = process
        return process, log

    def start_redis(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FleetStartError("redis-server is not installed (scripts/setup-fleet installs it)")
        self.redis_port = self.redis_port or free_port()  # a restart keeps its port
        argv = [
            binary,
            "--port",
            str(self.redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        process, log = self.spawn("redis", argv)
        wait_listening(self.redis_port, process, "redis-server", log)

    def start_replica(self, number: int) -> None:
        port = self.replica_ports[number] if number < len(self.replica_ports) else free_port()
        config = self.folder / f"replica-{number}.toml"
        text = re.sub(
            r"(?m)^port = \d+$", f"port = {port}", REPLICA_CONFIG.read_text(encoding="utf-8"), count=1
        )
        config.write_text(text, encoding="utf-8")
        env = {
            **os.environ,
            "MCP_GATEWAY_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "MCP_GATEWAY_REPLICA": f"r{number}",
            "MCP_GATEWAY_FLEET_KEYS": self.keys,
        }
        argv = [sys.executable, "-m", "actors", "serve", "--config", str(config), "--log-level", "WARNING"]
        process, log = self.spawn(f"replica-{number}", argv, env)
        if number >= len(self.replica_ports):
            self.replica_ports.append(port)
        wait_listening(port, process, f"replica r{number}", log)

    def start_haproxy(self) -> None:
        binary = shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
        )
        if binary is None:
            raise FleetStartError("haproxy is not installed (scripts/setup-fleet installs it)")
        self.haproxy_port = free_port()
        servers = "".join(f"    server r{n} 127.0.0.1:{port}\n" for n, port in enumerate(self.replica_ports))
        config = self.folder / "haproxy.cfg"
        config.write_text(balancer_config(self.sticky) + servers, encoding="utf-8")
        env = {**os.environ, "MCP_FLEET_PORT": str(self.haproxy_port)}
        process, log = self.spawn("haproxy", [binary, "-db", "-f", str(config)], env)
        wait_listening(self.haproxy_port, process, "haproxy", log)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop_all(self) -> None:
        for name in list(self.processes)[::-1]:
            self.stop(name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.haproxy_port}/mcp"


def balancer_config(sticky: bool) -> str:
    """config/fleet/haproxy.cfg, or (not `sticky`) the same without its stick table and balancing round
    robin: every request of a legacy session on the next replica, the case a session must survive."""
    text = HAPROXY_CONFIG.read_text(encoding="utf-8")
    if sticky:
        return text
    text, removed = STICKINESS.subn("", text)
    text, balanced = re.subn(r"(?m)^(\s*)balance \w+$", r"\1balance roundrobin", text)
    if removed != 3 or balanced != 1:
        raise FleetStartError(f"{HAPROXY_CONFIG}: not the stick lines and balance line --no-stick removes")
    return text


@contextmanager
def fleet_running(replicas: int, keep: bool, *, sticky: bool = True) -> Iterator[Fleet]:
    with ExitStack() as stack:
        folder = Path(tempfile.mkdtemp(prefix="mcp-fleet-"))
        if not keep:
            stack.callback(shutil.rmtree, folder, True)
        fleet = Fleet(folder, sticky=sticky)
        stack.callback(fleet.stop_all)
        fleet.start_redis()
        for number in range(replicas):
            fleet.start_replica(number)
        fleet.start_haproxy()
        yield fleet


@attrs.define
class Tally:
    """One era's calls: latencies of the right answers, errors and wrong answers, with a sample of each."""

    clients: int = 0
    latencies_s: list[float] = attrs.field(factory=list)
    errors: int = 0
    wrong: int = 0
    samples: list[str] = attrs.field(factory=list)
    failures: list[tuple[float, float, str]] = attrs.field(factory=list)  # (sent, ended, what), trio time

    @property
    def calls(self) -> int:
        return len(self.latencies_s) + self.errors + self.wrong

    def note(self, what: str) -> None:
        if len(self.samples) < 3:
            self.samples.append(what[:200])


def shown(exc: BaseException) -> str:
    """What failed, for the table: the groups' leaves, each as `Type: message`."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(shown(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def client_loop(url: str, mode: str, until: float, tally: Tally, seed: int) -> None:
    """One SDK client calling `calculate` with a sum of its own until `until` (trio time). A client that
    fails whole (its transport gave up) is counted as one error and connected again, after RECONNECT_S."""
    rng = random.Random(seed)
    while trio.current_time() < until:
        try:
            await one_client(url, mode, until, tally, rng)
        except Exception as exc:  # the client failed whole: one error, shown, and a new client
            tally.errors += 1
            tally.note(f"client: {shown(exc)}")
            tally.failures.append((trio.current_time(), trio.current_time(), f"client: {shown(exc)}"))
            await trio.sleep(RECONNECT_S)


async def one_client(url: str, mode: str, until: float, tally: Tally, rng: random.Random) -> None:
    async with (
        httpx2.AsyncClient(timeout=CALL_S) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        while trio.current_time() < until:
            a, b = rng.randrange(1 << 40), rng.randrange(1 << 40)
            began = trio.current_time()
            try:
                with trio.fail_after(CALL_S):
                    result = await client.call_tool("calculate", {"expression": f"{a} + {b}"})
            except Exception as exc:  # every failure is counted and shown, whatever it is
                tally.errors += 1
                tally.note(shown(exc))
                tally.failures.append((began, trio.current_time(), shown(exc)))
                continue
            text = getattr(result.content[0], "text", None) if result.content else None
            if result.is_error or text != str(a + b):
                tally.wrong += 1
                tally.note(f"{a} + {b} answered {text!r}")
            else:
                tally.latencies_s.append(trio.current_time() - began)


async def load(url: str, seconds: float, clients: int) -> dict[str, Tally]:
    tallies = {era: Tally(clients=clients) for era in ERAS}
    until = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for era, mode in ERAS.items():
            for number in range(clients):
                nursery.start_soon(client_loop, url, mode, until, tallies[era], hash((era, number)))
    return tallies


def report(tallies: dict[str, Tally], seconds: float, replicas: int) -> int:
    header = ("era", "clients", "calls", "calls/s", "p50 ms", "p99 ms", "errors", "wrong")
    print(f"{header[0]:<12}" + "".join(f"{name:>9}" for name in header[1:]))
    for era, tally in tallies.items():
        ok = sorted(tally.latencies_s)
        p50 = statistics.median(ok) * 1000 if ok else 0.0
        p99 = ok[min(len(ok) - 1, int(len(ok) * 0.99))] * 1000 if ok else 0.0
        rate = tally.calls / seconds
        cells = (
            tally.clients,
            tally.calls,
            f"{rate:.1f}",
            f"{p50:.1f}",
            f"{p99:.1f}",
            tally.errors,
            tally.wrong,
        )
        print(f"{era:<12}" + "".join(f"{cell:>9}" for cell in cells))
        for sample in tally.samples:
            print(f"    {era}: {sample}")
    calls = sum(t.calls for t in tallies.values())
    errors = sum(t.errors for t in tallies.values())
    wrong = sum(t.wrong for t in tallies.values())
    print(f"fleet: {replicas} replicas, {calls} calls, {errors} errors, {wrong} wrong answers")
    return 0 if errors == 0 and wrong == 0 and calls > 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3, help="gateway replicas (default 3)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the load runs (default 10)")
    parser.add_argument("--clients", type=int, default=4, help="SDK clients per era (default 4)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (configs and logs)")
    parser.add_argument(
        "--no-stick",
        action="store_true",
        help="HAProxy without stickiness, round robin: each request of a session on the next replica",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.replicas <= 16 or not 0 < args.seconds <= 3600 or not 1 <= args.clients <= 64:
        parser.error("--replicas 1..16, --seconds up to 3600, --clients 1..64")
    try:
        with fleet_running(args.replicas, args.keep, sticky=not args.no_stick) as fleet:
            balance = "round robin, no stickiness" if args.no_stick else "sticky"
            print(
                f"fleet: {args.replicas} replicas behind HAProxy ({balance}) at {fleet.url}, "
                f"Redis on {fleet.redis_port}" + (f", logs in {fleet.folder}" if args.keep else ""),
                file=sys.stderr,
            )
            tallies = trio.run(load, fleet.url, args.seconds, args.clients)
    except FleetStartError as exc:
        print(f"fleet: {exc}", file=sys.stderr)
        print(f"fleet: {args.replicas} replicas, 0 calls, 1 errors, 0 wrong answers")
        return 1
    return report(tallies, args.seconds, args.replicas)


if __name__ == "__main__":
    sys.exit(main())
