"""What the integration tests share: configs on disk, the gateway as a real subprocess, and two clients.

`sdk_client` is the official MCP SDK client over real stdio pipes; `RawClient` writes and reads raw lines, for
what the SDK would never send. Nothing here sleeps to wait: everything waits on a line, a notification or a
process exit, each under a generous deadline that only fails a broken run.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import mcp_types as types
import orjson
import trio
from loguru import logger
from mcp import Client, StdioServerParameters
from trio_websocket import WebSocketConnection, open_websocket_url

from actors.config import load_config
from actors.gateway import Gateway
from actors.protocol import codec
from actors.protocol.messages import Encoded, Message

if TYPE_CHECKING:
    import httpx2

ROOT: Final = Path(__file__).resolve().parent.parent
INTEROP: Final = ROOT / "tests" / "interop"  # the interop tier: its npm packages under node_modules
SERVER_EVERYTHING: Final = (
    INTEROP / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
TEST_BACKEND: Final = ROOT / "tests" / "backends" / "testbackend.py"
DEADLINE_S: Final = 30.0  # only a broken run ever gets near this
SESSION_DEADLINE_S: Final = (
    120.0  # a whole SDK session, so a hung gateway fails its test instead of the suite
)
# A raw initialize request (2025-11-25), for the tests that speak HTTP or WebSocket without the SDK
INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
LEGACY_ERA: Final = "legacy"  # the SDK Client's mode= for the initialize handshake (2025-11-25 and older)


# --- configs ------------------------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def write_config(path: Path, backends: Iterable[Mapping[str, Any]], **gateway: Any) -> Path:
    lines = ["[gateway]", *(f"{key} = {toml_value(value)}" for key, value in gateway.items()), ""]
    for backend in backends:
        lines.append("[[backends]]")
        restart = backend.get("restart")
        lines += [f"{key} = {toml_value(value)}" for key, value in backend.items() if key != "restart"]
        if restart:
            lines.append("[backends.restart]")
            lines += [f"{key} = {toml_value(value)}" for key, value in restart.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def backend_entry(name: str, *flags: str, **settings: Any) -> dict[str, Any]:
    """A [[backends]] entry running the project's test backend under this interpreter."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(TEST_BACKEND), "--name", name, *flags],
        **settings,
    }


def fast_restarts(**overrides: Any) -> dict[str, Any]:
    return {"backoff_initial_s": 0.05, "backoff_max_s": 0.2, "max_restarts": 5, "window_s": 60, **overrides}


def gateway_argv(config: Path, log_file: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "actors",
        "serve",
        "--stdio",
        "--config",
        str(config),
        "--log-file",
        str(log_file),
        *extra,
    ]


# --- the SDK client ---------------------------------------------------------------------------------------


@attrs.define
class Notifications:
    """Server notifications as they arrive; tests wait for a count of one method."""

    seen: list[str] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def handle(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None:
            self.seen.append(method)
            self._changed.set()
            self._changed = trio.Event()

    def count(self, method: str) -> int:
        return self.seen.count(method)

    async def wait_for(self, method: str, count: int) -> None:
        with trio.fail_after(DEADLINE_S):
            while self.count(method) < count:
                await self._changed.wait()


@asynccontextmanager
async def sdk_client(
    config: Path,
    log_file: Path,
    notifications: Notifications | None = None,
    *,
    mode: str = LEGACY_ERA,
    **options: Any,
) -> AsyncIterator[Client]:
    """The SDK client over stdio to a gateway subprocess. `mode` is the SDK's era choice; the default pins
    the initialize handshake, since the SDK's own default ("auto") would turn modern as soon as the gateway
    answers server/discover. A test of the 2026 era passes mode="2026-07-28" on purpose."""
    argv = gateway_argv(config, log_file)
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    handler = notifications.handle if notifications is not None else None
    with trio.fail_after(SESSION_DEADLINE_S):
        async with Client(params, mode=mode, message_handler=handler, **options) as client:
            yield client


def sampler(
    name: str,
    entered: trio.Event | None = None,
    release: trio.Event | None = None,
    prompts: list[str] | None = None,
) -> Any:
    """A sampling callback that answers `{name} answers {prompt}` as model `model-of-{name}`, after `release`
    when given; it sets `entered` when called and notes each prompt in `prompts`."""

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompt = params.messages[0].content.text  # type: ignore[union-attr]
        if prompts is not None:
            prompts.append(prompt)
        if entered is not None:
            entered.set()
        if release is not None:
            await release.wait()
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"{name} answers {prompt}"),
            model=f"model-of-{name}",
        )

    return sample


async def progress_and_sampling(client: Client, sampled: str) -> None:
    """The test backend's progress tool reports every step to the caller, and its ask_client tool gets the
    answer of this client's sampling callback (which says `sampled`)."""
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    done = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert done.content[0].text == "done 3"  # type: ignore[union-attr]
    assert steps == [1, 2, 3]
    asked = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    answer = await client.call_tool("ask_client", asked)
    assert answer.structured_content["result"]["content"]["text"] == sampled  # type: ignore[index]


async def tool_names(client: Client) -> list[str]:
    result = await client.list_tools(cache_mode="bypass")
    return [tool.name for tool in result.tools]


async def listed_again(client: Client, notifications: Notifications, seen: int, tool: str) -> None:
    """tools/list after each list_changed until `tool` is back (its backend restarted and ready)."""
    with trio.fail_after(DEADLINE_S):
        while tool not in await tool_names(client):
            seen += 1
            await notifications.wait_for("notifications/tools/list_changed", seen)


# --- the raw client -----------------------------------------------------------------------------------------


class JsonRpcWriter:
    """Builds requests and notifications on a subclass's `send`; reads with its `receive`."""

    async def send(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    async def receive(self) -> dict[str, Any]:
        raise NotImplementedError

    async def receive_until(self, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Every message up to and including the first for which `stop` is true."""
        messages = [await self.receive()]
        while not stop(messages[-1]):
            messages.append(await self.receive())
        return messages

    async def request(
        self, request_id: int | str, method: str, params: Mapping[str, Any] | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def call(self, request_id: int | str, tool: str, **arguments: Any) -> None:
        await self.request(request_id, "tools/call", {"name": tool, "arguments": arguments})


@attrs.define
class RawClient(JsonRpcWriter):
    """The gateway over real pipes, one JSON line at a time."""

    process: trio.Process
    _buffer: bytearray = attrs.field(factory=bytearray)

    async def send_line(self, line: bytes | str) -> None:
        data = line.encode() if isinstance(line, str) else line
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data + b"\n")

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.send_line(orjson.dumps(message))

    async def next_line(self) -> bytes:
        """The next line the gateway writes, as bytes."""
        assert self.process.stdout is not None
        with trio.fail_after(DEADLINE_S):
            while b"\n" not in self._buffer:
                chunk = await self.process.stdout.receive_some(65536)
                if not chunk:
                    raise EOFError("the gateway closed its stdout")
                self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer[:] = rest
        return line

    async def receive(self) -> dict[str, Any]:
        """The next line the gateway writes, parsed; fails on anything that is not a JSON object."""
        line = await self.next_line()
        message = orjson.loads(line)
        assert isinstance(message, dict), f"stdout carried a non-object line: {line!r}"
        return message

    async def answer_to(self, request_id: int | str) -> dict[str, Any]:
        return (await self.receive_until(lambda message: message.get("id") == request_id))[-1]

    async def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        info = {"name": "raw-test", "version": "0"}
        await self.request(
            "init", "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": info}
        )
        answer = await self.answer_to("init")
        await self.notify("notifications/initialized")
        return answer

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def rest_of_stdout(self) -> bytes:
        """Everything the gateway writes until it closes stdout."""
        assert self.process.stdout is not None
        data = bytes(self._buffer)
        self._buffer.clear()
        with trio.fail_after(DEADLINE_S):
            while chunk := await self.process.stdout.receive_some(65536):
                data += chunk
        return data

    async def wait_exit(self) -> int:
        with trio.fail_after(DEADLINE_S):
            return await self.process.wait()


@asynccontextmanager
async def raw_gateway(config: Path, log_file: Path) -> AsyncIterator[RawClient]:
    process = await trio.lowlevel.open_process(
        gateway_argv(config, log_file), stdin=-1, stdout=-1, stderr=None, cwd=str(ROOT)
    )
    try:
        yield RawClient(process)
    finally:
        await stop_process(process)


async def stop_process(process: trio.Process) -> None:
    """SIGTERM, then SIGKILL if it is still there after DEADLINE_S; its pipes closed."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(DEADLINE_S):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


async def search_stream(stream: trio.abc.ReceiveStream, pattern: re.Pattern[bytes], what: str) -> str:
    """Read `stream` until `pattern` matches what came so far; its first group. AssertionError, with what
    came, naming `what` when the stream ends first."""
    seen = b""
    with trio.fail_after(DEADLINE_S):
        while (found := pattern.search(seen)) is None:
            chunk = await stream.receive_some(65536)
            if not chunk:
                raise AssertionError(f"the stream ended before {what}:\n{seen.decode(errors='replace')}")
            seen += chunk
    return found[1].decode()


async def drain(stream: trio.abc.ReceiveStream) -> None:
    """Read and drop until the end, so the writer never blocks on a full pipe."""
    while await stream.receive_some(65536):
        pass


@attrs.define
class WsClient(JsonRpcWriter):
    """The gateway over a real WebSocket, one JSON text message at a time."""

    connection: WebSocketConnection

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.connection.send_message(orjson.dumps(message).decode())

    async def receive(self) -> dict[str, Any]:
        with trio.fail_after(DEADLINE_S):
            return orjson.loads(await self.connection.get_message())

    async def answer_to(self, request_id: int | str) -> dict[str, Any]:
        while (message := await self.receive()).get("id") != request_id or "method" in message:
            pass
        return message

    async def initialize(self) -> None:
        info = {"name": "ws-test", "version": "0"}
        await self.request(
            "init", "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        )
        assert "result" in await self.answer_to("init")
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@asynccontextmanager
async def connect(url: str, *, initialize: bool = True, **options: Any) -> AsyncIterator[WsClient]:
    options.setdefault("subprotocols", ["mcp"])
    async with open_websocket_url(url, max_message_size=16 * 1024 * 1024, **options) as connection:
        client = WsClient(connection)
        if initialize:
            await client.initialize()
        yield client


# --- processes ---------------------------------------------------------------------------------------------


def read_log(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def started_pids(state_file: Path) -> list[int]:
    """The pids a test backend recorded in its --state-file, one per start."""
    if not state_file.exists():
        return []
    return [int(line.split()[1]) for line in state_file.read_text().splitlines() if line.startswith("start ")]


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "?")
    return state not in ("Z", "X")


def processes_tagged(tag: str) -> list[int]:
    """The processes whose command line holds `tag` (a test's own marker among its backends' arguments)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def wait_until_gone(pids: Iterable[int]) -> None:
    """Wait for processes to end (polling /proc is the only portable way for non-children)."""
    pending = set(pids)
    with trio.fail_after(DEADLINE_S):
        while pending := {pid for pid in pending if is_running(pid)}:  # noqa: ASYNC110
            await trio.sleep(0.05)  # no event exists for the exit of a process that is not our child


def kill_quietly(pids: Iterable[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- a gateway in this process, with network listeners ---------------------------------------------------


def with_websocket(config: Path, **settings: Any) -> Path:
    """Append a [websocket] table (port 0: any free port) and its [websocket.auth] if given."""
    return with_listener(config, "websocket", **settings)


def with_http(config: Path, **settings: Any) -> Path:
    """Append an [http] table (port 0: any free port) and its [http.auth] if given."""
    return with_listener(config, "http", **settings)


def with_listener(config: Path, table: str, **settings: Any) -> Path:
    auth = settings.pop("auth", None)
    settings = {"port": 0, **settings}
    lines = ["", f"[{table}]", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    if auth:
        lines += [f"[{table}.auth]", *(f"{k} = {toml_value(v)}" for k, v in auth.items())]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")
    return config


@asynccontextmanager
async def running(config: Path) -> AsyncIterator[Gateway]:
    gateway = Gateway(load_config(config))
    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: gateway.run(task_status=task_status))
        try:
            yield gateway
        finally:
            gateway.stop()


@asynccontextmanager
async def url_printed_by(argv: list[str]) -> AsyncIterator[str]:
    """A server process that prints its URL as its first line (once it listens); that URL while it runs,
    terminated after."""
    async with trio.open_nursery() as nursery:
        serve = partial(trio.run_process, argv, stdout=subprocess.PIPE, check=False)
        process: trio.Process = await nursery.start(serve)
        assert process.stdout is not None
        try:
            received = b""
            with trio.fail_after(DEADLINE_S):
                while not received.endswith(b"\n"):
                    chunk = await process.stdout.receive_some(1024)
                    assert chunk, "the server exited before printing its URL"
                    received += chunk
            yield received.decode().strip()
        finally:
            process.terminate()


@contextmanager
def captured_logs(level: str = "WARNING") -> Iterator[list[str]]:
    """The gateway's log lines of `level` and up while inside, each as "LEVEL message"."""
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m).rstrip("\n")), level=level, format="{level} {message}")
    try:
        yield lines
    finally:
        logger.remove(sink)


class DecodedOutbox:
    """A session's outbox as a test reads it: an answer that waited for the writer is queued as its frame
    (Encoded), and is read back here as the message it was."""

    def __init__(self, channel: trio.MemoryReceiveChannel[Message | Encoded]) -> None:
        self.channel = channel

    async def receive(self) -> Message:
        return decoded(await self.channel.receive())

    def receive_nowait(self) -> Message:
        return decoded(self.channel.receive_nowait())

    def __aiter__(self) -> DecodedOutbox:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.channel, name)


def decoded(message: Message | Encoded) -> Message:
    return codec.decode(message.frame) if isinstance(message, Encoded) else message


async def sse_events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """The events of an SSE response: each a dict of its fields (id, event, data, retry)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value[1:] if value.startswith(" ") else value


def free_port() -> int:
    """A port free on loopback now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_listening(process: subprocess.Popen[bytes], *ports: int) -> None:
    """Until each port takes a connection (a gateway's listeners bind before its backends start); fails at
    once if the process exits meanwhile."""
    with trio.fail_after(DEADLINE_S):
        for port in ports:
            while True:
                assert process.poll() is None, "the gateway exited during start-up"
                try:
                    await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await trio.sleep(0.05)


@contextmanager
def serving_gateway(argv: list[str], *ports: int, **options: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A gateway process (`argv`) listening on `ports`, stopped by SIGTERM when done (killed if it hangs)."""
    options = {"cwd": ROOT, "stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, **options}
    process = subprocess.Popen(argv, **options)
    try:
        trio.run(wait_listening, process, *ports)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
