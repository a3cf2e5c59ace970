"""Chaos run: a real gateway, N test backends, C WebSocket sessions making calls, and a killer.

While the sessions keep M calls each in flight, a backend is hit every K seconds: killed with SIGKILL, frozen
(it stops answering anything, pings included, until the health check restarts it) or made to write garbage
(it must go on serving). With --reload-every R, every R seconds the config file is rewritten and reloaded
(`mcp-gateway reload`) with a backend added, removed or changed among the extra ones (r0, r1, ...), which
the sessions call too. At the end one table, and a non-zero exit if any invariant broke:
calls never answered, answered twice or to the wrong caller, failed calls to backends nobody was hitting or
reloading, child processes left behind.

    scripts/chaos [--duration S] [--clients C] [--calls M] [--backends N] [--kill-every K]
                  [--reload-every R] [--seed X] [--sandbox off|auto|require]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, connect_websocket_url

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))  # proctools.py, shared with the bench
from proctools import alive, descendants, peak_rss_mib, terminate  # noqa: E402

TEST_BACKEND: Final = ROOT / "tests" / "backends" / "testbackend.py"
MODES: Final = ("kill", "freeze", "garbage")
SETTLE_S: Final = 15.0  # after the run: how long calls still in flight may take to be answered
EXCUSE_MARGIN_S: Final = 0.5  # around a fault window, for calls answered as the backend went down or came up
SANDBOX: dict[str, str] = {"mode": "off"}  # --sandbox: every backend's [sandbox] mode (README "Sandboxing")


@attrs.define
class Fault:
    backend: str
    mode: str
    at: float
    seen_down: bool = False  # its tools left tools/list after the hit
    back_at: float | None = None  # when its tools were listed again
    inflight: set[tuple[int, int]] = attrs.field(factory=set)  # (session, id) in flight to it when hit
    all_answered_at: float | None = None

    def excuses(self, sent: float, answered: float) -> bool:
        if self.mode == "garbage":
            return False  # garbage is no excuse: the backend must keep serving
        end = (self.back_at if self.back_at is not None else float("inf")) + EXCUSE_MARGIN_S
        return sent <= end and answered >= self.at - EXCUSE_MARGIN_S


@attrs.define
class Tally:
    sent: int = 0
    ok: int = 0
    errors: int = 0
    duplicate_or_misrouted: int = 0
    unexcused_failures: list[str] = attrs.field(factory=list)
    faults: list[Fault] = attrs.field(factory=list)
    pending: dict[tuple[int, int], tuple[str, str, float]] = attrs.field(
        factory=dict
    )  # -> backend, text, sent

    def fault_windows(self, backend: str) -> Iterable[Fault]:
        return (fault for fault in self.faults if fault.backend == backend)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_config(folder: Path, backends: int, port: int, extras: dict[str, int] | None = None) -> Path:
    """The chaos config: b0..bN-1, and each extra backend (name -> its version: a changed one differs)."""
    lines = [
        "[gateway]",
        'name = "chaos-gateway"',
        'tool_names = "always-prefix"',
        "request_timeout_s = 20",
        "startup_timeout_s = 10",
        "shutdown_s = 5",
        "",
        "[websocket]",
        f"port = {port}",
        "max_sessions = 10000",
        "",
    ]
    named = [(f"b{n}", 0) for n in range(backends)] + sorted((extras or {}).items())
    for name, version in named:
        args = [str(TEST_BACKEND), "--name", name, "--only=echo,sleep,pid,freeze,garbage"]
        args += [f"--instructions=version {version}"] if version else []
        lines += [
            "[[backends]]",
            f'name = "{name}"',
            f"command = {orjson.dumps(sys.executable).decode()}",
            f"args = {orjson.dumps(args).decode()}",
            "[backends.restart]",
            "max_restarts = 1000",
            "window_s = 60",
            "backoff_initial_s = 0.1",
            "backoff_max_s = 1",
            "[backends.health]",
            "interval_s = 0.5",
            "timeout_s = 0.5",
            "failures = 2",
            "",
        ]
    lines += sandbox_table(SANDBOX["mode"])
    path = folder / "chaos.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def sandbox_table(mode: str) -> list[str]:
    """[sandbox] for every stdio backend: the test backend reads the repo (its imports), writes its cwd."""
    if mode == "off":
        return []
    return ["[sandbox]", f'mode = "{mode}"', f"read = {orjson.dumps(['{runtime}', str(ROOT)]).decode()}", ""]


async def connect(nursery: trio.Nursery, url: str) -> WebSocketConnection:
    with trio.fail_after(30):
        while True:
            try:
                return await connect_websocket_url(
                    nursery, url, subprotocols=["mcp"], max_message_size=1 << 24
                )
            except OSError:
                await trio.sleep(0.1)  # the gateway is still starting


class Session:
    """One client: a reader task matching answers to the calls waiting for them."""

    def __init__(self, number: int, connection: WebSocketConnection, tally: Tally) -> None:
        self.number = number
        self.connection = connection
        self.tally = tally
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.notifications: trio.MemorySendChannel[str] | None = None

    async def initialize(self) -> None:
        reply = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "chaos", "version": "0"},
            },
        )
        assert "result" in reply, reply
        await self.connection.send_message('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    async def read(self) -> None:
        try:
            while True:
                message = orjson.loads(await self.connection.get_message())
                if "method" in message:
                    if self.notifications is not None:
                        await self.notifications.send(message["method"])
                    continue
                waiter = self.waiting.pop(message.get("id"), None)
                if waiter is None:
                    self.tally.duplicate_or_misrouted += 1
                    continue
                waiter.send_nowait(message)
        except ConnectionClosed:
            pass

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self.ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self.waiting[request_id] = send
        await self.connection.send_message(
            orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).decode()
        )
        return await receive.receive()

    async def call(self, backend: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": f"{backend}__{tool}", "arguments": arguments})


async def client_worker(session: Session, backends: list[str], rng: random.Random, until: float) -> None:
    tally = session.tally
    while trio.current_time() < until:
        backend = rng.choice(backends)
        request_id = next(session.ids)
        text = f"s{session.number}-r{request_id}-{rng.random()}"
        tool, arguments = ("sleep", {"seconds": 0.2}) if rng.random() < 0.3 else ("echo", {"text": text})
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        session.waiting[request_id] = send
        key, sent = (session.number, request_id), trio.current_time()
        tally.pending[key] = (backend, text, sent)
        tally.sent += 1
        message = {"name": f"{backend}__{tool}", "arguments": arguments}
        await session.connection.send_message(
            orjson.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": message}
            ).decode()
        )
        reply = await receive.receive()
        answered = trio.current_time()
        del tally.pending[key]
        for fault in tally.faults:
            if key in fault.inflight:
                fault.inflight.discard(key)
                if not fault.inflight:
                    fault.all_answered_at = answered
        if "result" in reply and not reply["result"].get("isError"):
            tally.ok += 1
            if tool == "echo" and reply["result"].get("structuredContent") != {"text": text}:
                tally.duplicate_or_misrouted += 1
            continue
        tally.errors += 1
        if not any(fault.excuses(sent, answered) for fault in tally.fault_windows(backend)):
            error = reply.get("error", reply.get("result"))
            tally.unexcused_failures.append(f"{backend} at {answered - sent:.2f}s: {error}")


async def watch_catalog(control: Session, tally: Tally, listed: dict[str, bool], reloads: Reloads) -> None:
    """Re-list tools on every list_changed; a fault ends when its backend's tools are back (a backend a
    reload removed never is: calls to it stay excused, and sessions no longer pick it)."""
    send, receive = trio.open_memory_channel[str](100)
    control.notifications = send
    async for method in receive:
        if method != "notifications/tools/list_changed":
            continue
        reply = await control.request("tools/list", {})
        names = {tool["name"].split("__")[0] for tool in reply["result"]["tools"]}
        now = trio.current_time()
        for fault in tally.faults:
            listed.setdefault(fault.backend, False)
        for backend in listed:
            listed[backend] = backend in names
            for fault in tally.fault_windows(backend):
                if fault.mode == "garbage" or fault.back_at is not None:
                    continue
                if backend not in names:
                    fault.seen_down = True
                elif fault.seen_down:
                    fault.back_at = now


def backend_host_pid(gateway: int, name: str) -> int | None:
    """A sandboxed backend's pid as this host sees it: its `pid` tool answers from inside bwrap's pid
    namespace (2, 3...), a number that names some other process out here. Its command line says which."""
    wanted = f"testbackend.py\0--name\0{name}\0".encode()
    for pid in descendants(gateway):
        try:
            if wanted in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


async def killer(
    control: Session,
    tally: Tally,
    backends: list[str],
    rng: random.Random,
    every: float,
    until: float,
    gateway: int = 0,
) -> None:
    async with trio.open_nursery() as nursery:
        while trio.current_time() + every < until:
            await trio.sleep(every)
            backend, mode = rng.choice(backends), rng.choice(MODES)
            if any(f.backend == backend and f.back_at is None and f.mode != "garbage" for f in tally.faults):
                continue  # still down from the last hit
            fault = Fault(backend, mode, trio.current_time())
            fault.inflight = {key for key, (owner, _, _) in tally.pending.items() if owner == backend}
            if mode == "kill":
                reply = await control.call(backend, "pid", {})
                if "result" not in reply:
                    continue
                pid = reply["result"]["structuredContent"]["pid"]
                if SANDBOX["mode"] != "off":
                    pid = backend_host_pid(gateway, backend)
                    if pid is None:
                        continue
                fault.at = trio.current_time()
                fault.inflight = {key for key, (owner, _, _) in tally.pending.items() if owner == backend}
                tally.faults.append(fault)
                os.kill(pid, signal.SIGKILL)
            else:
                tally.faults.append(fault)
                nursery.start_soon(control.call, backend, mode, {})  # freeze's answer is an error, later


@attrs.define
class Reloads:
    """The extra backends as the config has them (name -> version), the ones sessions may call, and what
    each reload did."""

    folder: Path
    port: int
    backends: int
    environment: dict[str, str]
    extras: dict[str, int] = attrs.field(factory=dict)
    live: list[str] = attrs.field(factory=list)  # every backend a session may pick now
    done: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(("add", "remove", "change"), 0))
    refused: list[str] = attrs.field(factory=list)
    names: Iterable[int] = attrs.field(factory=itertools.count)


async def reloader(reloads: Reloads, tally: Tally, rng: random.Random, every: float, until: float) -> None:
    """Every `every` seconds: rewrite the config with one extra backend added, removed or changed, and reload
    it. The backend touched gets a fault window (calls to it may fail until its tools are back); every other
    backend must go on as if nothing happened."""
    while trio.current_time() + every < until:
        await trio.sleep(every)
        extras = reloads.extras
        action = rng.choice(["add", "remove", "change"] if extras else ["add"])
        if action == "add":
            name = f"r{next(reloads.names)}"  # type: ignore[call-overload]
            extras[name] = 0
        else:
            name = rng.choice(sorted(extras))
            if action == "remove":
                del extras[name]
                reloads.live.remove(name)  # sessions stop picking it before it goes
            else:
                extras[name] += 1
        tally.faults.append(Fault(name, f"reload-{action}", trio.current_time()))
        write_config(reloads.folder, reloads.backends, reloads.port, extras)
        command = [sys.executable, "-m", "actors", "reload", "--config", str(reloads.folder / "chaos.toml")]
        done = await trio.run_process(
            command,
            cwd=str(ROOT),
            env=reloads.environment,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        if done.returncode != 0:
            reloads.refused.append(done.stderr.decode().strip())
            continue
        reloads.done[action] += 1
        if action == "add":
            reloads.live.append(name)


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}s / {values[0]:.2f}s"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"{cuts[49]:.2f}s / {cuts[98]:.2f}s"


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    tally = Tally()
    backends = [f"b{n}" for n in range(args.backends)]
    with tempfile.TemporaryDirectory(prefix="chaos-") as folder:
        port = free_port()
        config = write_config(Path(folder), args.backends, port)
        log = Path(args.log) if args.log else Path(folder) / "gateway.log"
        argv = [sys.executable, "-m", "actors", "serve", "--config", str(config), "--log-file", str(log)]
        environment = {**os.environ, "XDG_RUNTIME_DIR": folder}  # where `reload` finds this gateway
        reloads = Reloads(Path(folder), port, args.backends, environment, live=list(backends))
        gateway = await trio.lowlevel.open_process(
            argv, cwd=str(ROOT), stderr=subprocess.DEVNULL, env=environment
        )
        url = f"ws://127.0.0.1:{port}/mcp"
        try:
            async with trio.open_nursery() as nursery:
                control = Session(0, await connect(nursery, url), tally)
                nursery.start_soon(control.read)
                await control.initialize()
                listed = dict.fromkeys(backends, True)
                nursery.start_soon(watch_catalog, control, tally, listed, reloads)
                sessions = []
                for number in range(1, args.clients + 1):
                    session = Session(number, await connect(nursery, url), tally)
                    nursery.start_soon(session.read)
                    await session.initialize()
                    sessions.append(session)
                started = trio.current_time()
                until = started + args.duration
                with trio.move_on_after(args.duration + SETTLE_S):  # ends early once every call is answered
                    async with trio.open_nursery() as load:
                        load.start_soon(
                            killer, control, tally, backends, rng, args.kill_every, until, gateway.pid
                        )
                        if args.reload_every:
                            reload_rng = random.Random(rng.random())
                            load.start_soon(reloader, reloads, tally, reload_rng, args.reload_every, until)
                        for session in sessions:
                            for _ in range(args.calls):
                                worker_rng = random.Random(rng.random())
                                load.start_soon(client_worker, session, reloads.live, worker_rng, until)
                never_answered = len(tally.pending)
                rss = peak_rss_mib(gateway.pid)
                family = descendants(gateway.pid)
                nursery.cancel_scope.cancel()
        finally:
            await terminate(gateway, 10)
        with trio.move_on_after(5):
            while any(alive(pid) for pid in family):  # noqa: ASYNC110 - not our children: nothing to wait on
                await trio.sleep(0.1)
        left = sorted(pid for pid in family if alive(pid))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        restarts = sum(1 for line in log.read_text().splitlines() if "restarting in" in line)
        report = {
            "calls sent": tally.sent,
            "answered with a result": tally.ok,
            "answered with an error": tally.errors,
            "never answered (must be 0)": never_answered,
            "answered twice or to the wrong caller (must be 0)": tally.duplicate_or_misrouted,
            "failed calls to backends not being hit (must be 0)": len(tally.unexcused_failures),
            "faults (kill / freeze / garbage)": "/".join(
                str(sum(1 for f in tally.faults if f.mode == mode)) for mode in MODES
            ),
            "reloads (add / remove / change)": "/".join(map(str, reloads.done.values())),
            "reloads refused (must be 0)": len(reloads.refused),
            "restarts observed": restarts,
            "fault to in-flight calls answered (p50 / p99)": percentiles(
                [f.all_answered_at - f.at for f in tally.faults if f.all_answered_at is not None]
            ),
            "fault to tools back in tools/list (p50 / p99)": percentiles(
                [f.back_at - f.at for f in tally.faults if f.back_at is not None]
            ),
            "gateway peak RSS": f"{rss:.1f} MiB",
            "gateway exit code": gateway.returncode,
            "child processes left after exit (must be 0)": len(left),
        }
        width = max(map(len, report))
        print(
            f"chaos: {args.duration:g}s, {args.clients} clients x {args.calls} calls, "
            f"{args.backends} backends, a fault every {args.kill_every:g}s"
            + (f", a reload every {args.reload_every:g}s" if args.reload_every else "")
            + f" (seed {args.seed})"
        )
        for name, value in report.items():
            print(f"  {name.ljust(width)}  {value}")
        for failure in tally.unexcused_failures[:10]:
            print(f"  unexcused: {failure}", file=sys.stderr)
        for refusal in reloads.refused[:3]:
            print(f"  reload refused: {refusal}", file=sys.stderr)
        broken = never_answered or tally.duplicate_or_misrouted or tally.unexcused_failures or left
        broken = broken or reloads.refused
        print("FAIL: an invariant broke" if broken else "OK: every invariant held")
        return 1 if broken else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load (default 20)")
    parser.add_argument("--clients", type=int, default=8, help="WebSocket sessions (default 8)")
    parser.add_argument("--calls", type=int, default=4, help="calls each session keeps in flight (default 4)")
    parser.add_argument("--backends", type=int, default=4, help="test backends (default 4)")
    parser.add_argument("--kill-every", type=float, default=2.0, help="seconds between faults (default 2)")
    parser.add_argument(
        "--reload-every", type=float, default=0.0, help="seconds between config reloads (default 0: none)"
    )
    parser.add_argument("--log", help="keep the gateway's log in this file")
    parser.add_argument(
        "--sandbox",
        choices=("off", "auto", "require"),
        default="off",
        help="every backend sandboxed ([sandbox] mode; require needs every rule enforceable here)",
    )
    parser.add_argument("--seed", type=int, default=random.randrange(1_000_000), help="for a repeatable run")
    args = parser.parse_args()
    SANDBOX["mode"] = args.sandbox
    return trio.run(run, args)


if __name__ == "__main__":
    raise SystemExit(main())
