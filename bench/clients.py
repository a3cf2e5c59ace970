"""The bench's two clients and its measuring loop.

`Peer` is a lean client of ours (orjson over pipes or a WebSocket, many calls in flight on one connection,
answers matched by id); `SdkPeer` is the official SDK's `mcp.Client` over stdio, what users run (with the
initialize handshake, as the lean client). `measure` keeps N echo calls in flight on either for a while and
adds the calls, latencies and CPU it saw to a `Sample`. Every process either client starts is stopped by
`stop_all`.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Protocol

import attrs
import orjson
import trio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from proctools import alive, child_with_env, children, cpu_seconds
from trio_websocket import WebSocketConnection, connect_websocket_url

ROOT: Final = Path(__file__).resolve().parent.parent
CHILD_ENV: Final = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}
STARTED: Final[list[trio.Process]] = []  # every process the lean client started
SDK_PIDS: Final[list[int]] = []  # every process the SDK client started
INITIALIZE: Final = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"},
}
ECHO: Final = {"text": "hello from the benchmark"}
MARKERS: Final = itertools.count(1)


class Connection(Protocol):
    """What `measure` needs of a client's connection to the process under test."""

    gateway_pid: int | None  # the process under test; None when the backend is reached directly

    async def call_echo(self) -> bool: ...  # True when the call was answered with a result

    def cpu(self) -> tuple[float, float]: ...  # CPU seconds so far: the process under test, its backends


def process_cpu(gateway: int | None, backends: list[int]) -> tuple[float, float]:
    """CPU seconds so far of the process under test (0 when there is none) and of its backends."""
    return cpu_seconds(gateway) if gateway else 0.0, sum(cpu_seconds(pid) for pid in backends)


@attrs.define
class Peer:
    """The lean client: one MCP connection with many requests in flight; answers matched by id."""

    send_line: Callable[[bytes], Awaitable[None]]
    gateway_pid: int | None  # None: the backend is reached directly
    backend_pids: list[int]
    close: Callable[[], Awaitable[None]] | None = None
    waiting: dict[int, trio.Event] = attrs.field(factory=dict)
    replies: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    next_id: int = 0

    def deliver(self, line: bytes) -> None:
        message = orjson.loads(line)
        request_id = message.get("id")
        if isinstance(request_id, int) and request_id in self.waiting:
            self.replies[request_id] = message
            self.waiting.pop(request_id).set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id, done = self.next_id, trio.Event()
        self.waiting[request_id] = done
        await self.send_line(
            orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        await done.wait()
        return self.replies.pop(request_id)

    async def call_echo(self) -> bool:
        return "result" in await self.request("tools/call", {"name": "echo", "arguments": ECHO})

    async def initialize(self) -> None:
        await self.request("initialize", INITIALIZE)
        await self.send_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def cpu(self) -> tuple[float, float]:
        return process_cpu(self.gateway_pid, self.backend_pids)


async def _start(argv: list[str], pipes: bool) -> trio.Process:
    """The process under test, from the repository's root with this tree's `actors` first on its path."""
    stdio = subprocess.PIPE if pipes else subprocess.DEVNULL
    process = await trio.lowlevel.open_process(
        argv, stdin=stdio, stdout=stdio, stderr=subprocess.DEVNULL, cwd=str(ROOT), env=CHILD_ENV
    )
    STARTED.append(process)
    return process


async def stdio_peer(nursery: trio.Nursery, argv: list[str], via_gateway: bool) -> Peer:
    process = await _start(argv, pipes=True)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout, lock = process.stdin, process.stdout, trio.StrictFIFOLock()

    async def send_line(data: bytes) -> None:
        async with lock:  # one writer at a time on a pipe
            await stdin.send_all(data + b"\n")

    peer = Peer(send_line, process.pid if via_gateway else None, [] if via_gateway else [process.pid])
    peer.close = stdin.aclose
    nursery.start_soon(_read_lines, stdout, peer)
    await peer.initialize()
    if via_gateway:
        peer.backend_pids = sorted(children(process.pid))
    return peer


async def _read_lines(stream: trio.abc.ReceiveStream, peer: Peer) -> None:
    buffer = b""
    while chunk := await stream.receive_some(1 << 16):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line:
                peer.deliver(line)


async def websocket_peer(
    nursery: trio.Nursery, argv: list[str], port: int, headers: list[tuple[str, str]] | None = None
) -> Peer:
    """A gateway started from `argv`, reached over its WebSocket on `port` (with `headers`: a token)."""
    process = await _start(argv, pipes=False)
    peer = await websocket_session(nursery, port, headers, process.pid)
    peer.backend_pids = sorted(children(process.pid))
    return peer


async def websocket_session(
    nursery: trio.Nursery, port: int, headers: list[tuple[str, str]] | None = None, pid: int = 0
) -> Peer:
    """One more initialized session with the gateway (process `pid`) listening on `port`."""
    with trio.fail_after(30):
        while True:
            try:
                connection = await connect_websocket_url(
                    nursery, f"ws://127.0.0.1:{port}/mcp", subprotocols=["mcp"], extra_headers=headers or []
                )
                break
            except OSError:
                await trio.sleep(0.05)

    async def send_line(data: bytes) -> None:
        await connection.send_message(data.decode())

    peer = Peer(send_line, pid, [])
    nursery.start_soon(_read_frames, connection, peer)
    await peer.initialize()
    return peer


async def _read_frames(connection: WebSocketConnection, peer: Peer) -> None:
    while True:
        peer.deliver((await connection.get_message()).encode())


@attrs.define
class SdkPeer:
    """The official SDK's client over stdio to the process under test, which it starts itself."""

    client: Client
    gateway_pid: int | None
    backend_pids: list[int]
    done: trio.Event = attrs.field(factory=trio.Event)  # set: the client closes its session and ends

    async def call_echo(self) -> bool:
        try:
            result = await self.client.call_tool("echo", ECHO)
        except MCPError:
            return False
        return not result.is_error

    def cpu(self) -> tuple[float, float]:
        return process_cpu(self.gateway_pid, self.backend_pids)


async def sdk_peer(nursery: trio.Nursery, argv: list[str], via_gateway: bool) -> SdkPeer:
    """An SDK client session in a task of its own (its context is entered and left by one task), ready."""
    peer: SdkPeer = await nursery.start(_run_sdk_client, argv, via_gateway)
    return peer


async def _run_sdk_client(
    argv: list[str], via_gateway: bool, *, task_status: trio.TaskStatus[SdkPeer] = trio.TASK_STATUS_IGNORED
) -> None:
    marker = str(next(MARKERS))  # finds the process among ours while other clients start theirs
    env = {"PYTHONPATH": CHILD_ENV["PYTHONPATH"], "BENCH_SDK_PEER": marker}
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT), env=env)
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 (opening /dev/null does not block)
        # legacy: the initialize handshake, as the lean client does, so every path carries the same traffic
        async with Client(stdio_client(params, errlog=devnull), mode="legacy") as client:
            pid = child_with_env(os.getpid(), "BENCH_SDK_PEER", marker)
            assert pid is not None, f"the SDK's client started no process for {argv}"
            SDK_PIDS.append(pid)
            peer = SdkPeer(client, pid if via_gateway else None, [] if via_gateway else [pid])
            if via_gateway:
                peer.backend_pids = sorted(children(pid))
            await client.list_tools()  # the SDK lists tools before its first call; not in the timings
            task_status.started(peer)
            await peer.done.wait()


@attrs.define
class Sample:
    latencies: list[float] = attrs.field(factory=list)
    errors: int = 0
    seconds: float = 0.0
    gateway_cpu: float = 0.0
    backend_cpu: float = 0.0
    client_cpu: float = 0.0


async def measure(peer: Connection, concurrency: int, seconds: float, sample: Sample) -> None:
    """`concurrency` echo calls in flight for `seconds`; the calls and the CPU they cost added to `sample`."""
    gateway0, backend0 = peer.cpu()
    client0 = resource.getrusage(resource.RUSAGE_SELF)
    started = trio.current_time()
    until = started + seconds

    async def worker() -> None:
        while trio.current_time() < until:
            sent = trio.current_time()
            ok = await peer.call_echo()
            sample.latencies.append(trio.current_time() - sent)
            if not ok:
                sample.errors += 1

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    sample.seconds += trio.current_time() - started
    gateway1, backend1 = peer.cpu()
    client1 = resource.getrusage(resource.RUSAGE_SELF)
    sample.gateway_cpu += gateway1 - gateway0
    sample.backend_cpu += backend1 - backend0
    sample.client_cpu += (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)


async def stop_all() -> None:
    """SIGTERM every process the clients started (the gateways stop their backends), then reap them; the SDK's
    client stops its own when its session ends, so those are signalled only when still running."""
    with trio.CancelScope(shield=True):
        for process in STARTED:
            if process.returncode is None:
                process.terminate()
        left = [pid for pid in SDK_PIDS if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGTERM)
        with trio.move_on_after(10):
            for process in STARTED:
                await process.wait()
            if left:
                await trio.sleep(1)  # not our children to wait for: the SDK's client reaps them
        for process in STARTED:
            if process.returncode is None:
                process.kill()
        for pid in SDK_PIDS:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
