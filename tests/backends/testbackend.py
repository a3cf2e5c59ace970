"""The backend the gateway's tests drive: well-behaved tools plus flags that make it misbehave.

    python tests/backends/testbackend.py [--name NAME] [--only echo,add] [--state-file PATH]
        [--crash-on-start [CODE]] [--crash-after-starts N] [--hold-while PATH] [--hang-on-initialize]
        [--exit-after-initialize] [--exit-on-discover] [--banner] [--roots-on-start] [--bad-tools]
        [--garbage-only] [--page-size N] [--instructions TEXT] [--ignore-stdin-eof [--ignore-sigterm]]
        [--no-trace-context] [--tools-file PATH] [--env-to-stderr PREFIX] [--destructive]
        [--record-calls PATH]

Tools: echo, add, sleep, crash, pid, fail, rpc_error, progress, set_tools, ask_client, spawn_child,
stderr_flood, log, freeze, garbage, big_response, cancelled_requests, environment, leak_env, client_view,
send_raw; with --destructive also delete_item (annotated destructiveHint). --record-calls appends every
tools/call it receives (name and arguments, one JSON line each) to PATH before running it: what reached the
backend.
stdout carries MCP only (unless --banner, --garbage-only or the garbage and send_raw tools say otherwise);
logs go to stderr.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo: mcp_gateway_examples
from mcp_gateway_examples.toolserver import (
    Context,
    Json,
    JsonObject,
    MethodHandler,
    ToolError,
    ToolHandler,
    ToolServer,
    setup_logging,
    text_result,
)

log = logging.getLogger("testbackend")

VERSION: Final = "1.0.0"
STDERR_LINE: Final = 100  # bytes per stderr_flood line, newline included
STDERR_WRITE: Final = 4000  # bytes per write: whole lines, below PIPE_BUF so log lines never interleave
GARBAGE_PERIOD_S: Final = 0.05
HOLD_POLL_S: Final = 0.02
GARBAGE: Final = (
    b"this is not JSON",
    b"{not json either",
    b'{"jsonrpc": "2.0", "id": ',
    b"<html><body>500 Internal Server Error</body></html>",
    b"\x00\x01\x02 binary junk \xff\xfe",
)

_children: list[subprocess.Popen[bytes]] = []  # kept so they are never reaped or warned about
# A grandchild that tries to outlive the backend: argv[1:4] say setsid, ignore SIGTERM, double-fork (its
# first process forks and exits, so the grandchild's parent is gone). It writes its pid once set up.
ESCAPEE: Final = """
import os, signal, sys, time
setsid, ignore_sigterm, double_fork = (flag == "1" for flag in sys.argv[1:4])
if double_fork and os.fork():
    os._exit(0)
if setsid:
    os.setsid()
if ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.write(1, str(os.getpid()).encode() + b"\\n")
os.close(1)
while True:
    time.sleep(3600)
"""


def _schema(properties: JsonObject, required: tuple[str, ...] = ()) -> JsonObject:
    return {"type": "object", "properties": properties, "required": list(required)}


STRING: Final = {"type": "string"}
NUMBER: Final = {"type": "number"}
INTEGER: Final = {"type": "integer"}


# --- tools --------------------------------------------------------------------------------------------------


async def echo(ctx: Context, arguments: JsonObject) -> JsonObject:
    text = arguments["text"]
    return text_result(text, {"text": text})


async def add(ctx: Context, arguments: JsonObject) -> JsonObject:
    total = arguments["a"] + arguments["b"]
    return text_result(str(total), {"sum": total})


async def sleep(ctx: Context, arguments: JsonObject) -> JsonObject:
    seconds = arguments["seconds"]
    await trio.sleep(seconds)
    return text_result(f"slept {seconds}")


async def crash(ctx: Context, arguments: JsonObject) -> JsonObject:
    code = int(arguments.get("code", 1))
    log.warning("crash tool: exiting at once with code %d", code)
    sys.stderr.flush()
    os._exit(code)


async def pid(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result(str(os.getpid()), {"pid": os.getpid()})


async def fail(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result(arguments["message"], is_error=True)


async def rpc_error(ctx: Context, arguments: JsonObject) -> JsonObject:
    raise ToolError(int(arguments["code"]), arguments["message"], arguments.get("data"))


async def progress(ctx: Context, arguments: JsonObject) -> JsonObject:
    steps = int(arguments["steps"])
    delay = arguments.get("delay", 0)
    for step in range(1, steps + 1):
        await ctx.progress(step, steps, f"step {step} of {steps}")
        await trio.sleep(delay)
    return text_result(f"done {steps}")


TOOLS_FILE: list[Path] = []  # --tools-file: where set_tools keeps the extra tools, for every process
BUILTIN_EXTRA: Final = {"touch"}  # the tool --resources adds


async def set_tools(ctx: Context, arguments: JsonObject) -> JsonObject:
    extra: list[str] = arguments["extra"]
    clashes = sorted(set(extra) & (set(TOOLS) | BUILTIN_EXTRA))
    if clashes:
        return text_result(f"cannot replace built-in tools: {', '.join(clashes)}", is_error=True)
    _set_extra(ctx.server, extra)
    for path in TOOLS_FILE:
        _write_extra(path, extra)
    await ctx.server.tools_changed()
    return text_result("extra tools: " + ", ".join(extra), {"extra": extra})


def _set_extra(server: ToolServer, extra: list[str]) -> None:
    builtin = set(TOOLS) | BUILTIN_EXTRA
    for name in server.tool_names():
        if name not in builtin:
            server.remove_tool(name)
    for name in extra:
        description = f"A dynamic tool ({name}); echoes `text`."
        server.add_tool(name, echo, description=description, input_schema=ECHO_IN)


def list_shared_tools(server: ToolServer, path: Path) -> MethodHandler:
    """--tools-file: each tools/list reads the extra tools from `path` first (several processes of the
    backend, one per replica, serve one list)."""

    async def list_tools(ctx: Context, params: JsonObject) -> JsonObject:
        _set_extra(server, _read_extra(path))
        return server.list_tools_result(params)

    return list_tools


def _read_extra(path: Path) -> list[str]:
    extra = orjson.loads(path.read_bytes()) if path.exists() else []
    return [name for name in extra if isinstance(name, str)]


def _write_extra(path: Path, extra: list[str]) -> None:
    path.write_bytes(orjson.dumps(extra))


async def ask_name(ctx: Context, arguments: JsonObject) -> JsonObject:
    """The legacy twin of ts_modern_server.mjs's ask_name: a real elicitation, then a greeting."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.request_client(
        "elicitation/create", {"message": "What is your name?", "requestedSchema": schema}
    )
    result = answer.get("result", {})
    if result.get("action") != "accept":
        return text_result(f"no name: {orjson.dumps(answer).decode()}", is_error=True)
    return text_result(f"Hello, {result['content']['name']}")


async def ask_client(ctx: Context, arguments: JsonObject) -> JsonObject:
    timeout_s = arguments.get("timeout_s")
    answer = await ctx.request_client(arguments["method"], arguments.get("params", {}), timeout_s)
    return text_result(orjson.dumps(answer).decode(), answer)


def relist_roots_on_change(server: ToolServer, on_start: bool = False) -> None:
    """On notifications/roots/list_changed (and with `on_start` once initialized, as many servers do, when
    the client declared roots): ask the client for its roots and log what came back."""

    async def relist(params: JsonObject) -> None:
        answer = await server.request_client("roots/list")
        await server.notify("notifications/message", {"level": "info", "logger": "roots", "data": answer})

    async def list_on_start(params: JsonObject) -> None:
        if "roots" in server.client_capabilities:
            await relist(params)

    server.notification_handlers["notifications/roots/list_changed"] = relist
    if on_start:
        server.notification_handlers["notifications/initialized"] = list_on_start


async def client_view(ctx: Context, arguments: JsonObject) -> JsonObject:
    """What this server knows of its client: the capabilities it declared, the notifications it sent."""
    view = {"capabilities": ctx.server.client_capabilities, "notifications": ctx.server.notices}
    return text_result(orjson.dumps(view).decode(), view)


async def spawn_child(ctx: Context, arguments: JsonObject) -> JsonObject:
    flags = [arguments.get(flag, False) for flag in ("setsid", "ignore_sigterm", "double_fork")]
    if any(flags):
        return await _spawn_escapee(["1" if flag else "0" for flag in flags])
    stdio = None if arguments.get("inherit_stdio", False) else subprocess.DEVNULL
    start = functools.partial(subprocess.Popen, ["sleep", "3600"], stdin=stdio, stdout=stdio, stderr=stdio)
    child = await trio.to_thread.run_sync(start)
    _children.append(child)
    log.info("spawned grandchild %d", child.pid)
    return text_result(str(child.pid), {"pid": child.pid})


async def _spawn_escapee(flags: list[str]) -> JsonObject:
    argv = [sys.executable, "-c", ESCAPEE, *flags]
    devnull = subprocess.DEVNULL
    start = functools.partial(subprocess.Popen, argv, stdin=devnull, stdout=subprocess.PIPE, stderr=devnull)
    child = await trio.to_thread.run_sync(start)
    _children.append(child)
    assert child.stdout is not None
    escapee = int(await trio.to_thread.run_sync(child.stdout.readline))
    child.stdout.close()
    if flags[2] == "1":
        await trio.to_thread.run_sync(child.wait)  # the intermediate process is gone before we answer
    log.info("spawned grandchild %d (setsid, ignore SIGTERM, double fork: %s)", escapee, ",".join(flags))
    return text_result(str(escapee), {"pid": escapee})


async def environment(ctx: Context, arguments: JsonObject) -> JsonObject:
    """The backend's whole environment."""
    env = dict(os.environ)
    return text_result(orjson.dumps(sorted(env)).decode(), {"env": env})


def env_lines(prefix: str) -> list[str]:
    """NAME=value of each variable whose name starts with `prefix`: what a careless server prints."""
    return [f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith(prefix)]


async def leak_env(ctx: Context, arguments: JsonObject) -> JsonObject:
    """The variables starting with `prefix`, put where `how` says: "result" (its text), "tool_error" (an
    isError result), "error" (a JSON-RPC error's message and data), "stderr" (as ERROR lines), "log" (a
    notifications/message to the client)."""
    lines, how = env_lines(str(arguments["prefix"])), arguments["how"]
    text = "; ".join(lines)
    if how == "error":
        raise ToolError(-32000, f"cannot go on with {text}", {"env": lines})
    if how == "stderr":
        for line in lines:
            log.error("leaked %s", line)
    elif how == "log":
        await ctx.server.notify("notifications/message", {"level": "error", "logger": "leak", "data": text})
    return text_result(text, is_error=how == "tool_error")


async def send_raw(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Write each of `messages` (any JSON value) to stdout as one line, then answer. The strings
    "$requestId" and "$progressToken" anywhere in them stand for this call's id and progress token."""
    values = {"$requestId": ctx.request_id, "$progressToken": ctx.progress_token}

    def filled(value: Json) -> Json:
        if isinstance(value, str):
            return values.get(value, value)
        if isinstance(value, list):
            return [filled(item) for item in value]
        if isinstance(value, dict):
            return {key: filled(item) for key, item in value.items()}
        return value

    messages = arguments["messages"]
    for message in messages:
        await ctx.server.send_raw(orjson.dumps(filled(message)) + b"\n")
    return text_result(f"sent {len(messages)}", {"sent": len(messages)})


async def log_message(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Send one notifications/message to the client, then answer."""
    params = {"level": arguments.get("level", "info"), "logger": "testbackend", "data": arguments["data"]}
    await ctx.server.notify("notifications/message", params)
    return text_result("logged")


async def freeze(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Block the whole process: no answers, no pings, nothing, as a server stuck in a busy loop would."""
    seconds = float(arguments.get("seconds", 3600))
    log.warning("freeze tool: blocking the process for %ss", seconds)
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the event loop is the point
    return text_result(f"froze {seconds}s")


async def garbage(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Write every kind of bad line to stdout, then answer normally."""
    for line in (
        *GARBAGE,
        b'{"jsonrpc": "2.0", "id": 987654321, "result": {}}',
        b'{"jsonrpc": "2.0"}',
        b"[1, 2]",
    ):
        await ctx.server.send_raw(line + b"\n")
    await ctx.server.send_raw(
        b'{"jsonrpc": "2.0", "method": "notifications/mess'
    )  # a partial line, ended below
    await ctx.server.send_raw(b"age\n")
    return text_result("garbage sent", {"lines": len(GARBAGE) + 4})


async def big_response(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Answer with a text of `bytes` bytes (to exceed a max_message_bytes)."""
    return text_result("x" * int(arguments["bytes"]))


async def cancelled_requests(ctx: Context, arguments: JsonObject) -> JsonObject:
    """The requestId of every notifications/cancelled this server has received, in order."""
    notices = list(ctx.server.cancel_notices)
    return text_result(orjson.dumps(notices).decode(), {"cancelled": notices})


async def stderr_flood(ctx: Context, arguments: JsonObject) -> JsonObject:
    count = int(arguments["bytes"])
    await trio.to_thread.run_sync(_flood_stderr, count)
    return text_result(f"wrote {count} bytes to stderr", {"bytes": count})


def _flood_stderr(count: int) -> None:
    sys.stderr.flush()
    line = b"x" * (STDERR_LINE - 1) + b"\n"
    per_write = STDERR_WRITE // STDERR_LINE
    full, rest = divmod(count, STDERR_LINE)
    while full:
        lines = min(full, per_write)
        _write_all(2, line * lines)
        full -= lines
    if rest:
        _write_all(2, b"x" * (rest - 1) + b"\n")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


ECHO_IN: Final = _schema({"text": {"type": "string", "description": "The text to send back."}}, ("text",))

ToolSpec = tuple[ToolHandler, str, JsonObject, JsonObject | None]

TOOLS: Final[dict[str, ToolSpec]] = {
    "echo": (
        echo,
        "Echo `text` back as text and as structuredContent.",
        ECHO_IN,
        _schema({"text": STRING}, ("text",)),
    ),
    "add": (
        add,
        "Add two numbers; the sum as text and as structuredContent.",
        _schema({"a": NUMBER, "b": NUMBER}, ("a", "b")),
        _schema({"sum": NUMBER}, ("sum",)),
    ),
    "sleep": (
        sleep,
        "Sleep `seconds`, then answer 'slept {seconds}'. notifications/cancelled stops it (no answer then).",
        _schema({"seconds": {"type": "number", "minimum": 0}}, ("seconds",)),
        None,
    ),
    "crash": (
        crash,
        "Exit the backend process at once with exit status `code` (default 1). Never answers.",
        _schema({"code": {"type": "integer", "default": 1, "minimum": 0, "maximum": 255}}),
        None,
    ),
    "pid": (pid, "The backend's process id.", _schema({}), _schema({"pid": INTEGER}, ("pid",))),
    "fail": (
        fail,
        "Answer a tool result with isError true and `message` as its text.",
        _schema({"message": STRING}, ("message",)),
        None,
    ),
    "rpc_error": (
        rpc_error,
        "Answer a JSON-RPC error response with this `code`, `message` and (optional) `data`.",
        _schema({"code": INTEGER, "message": STRING, "data": {}}, ("code", "message")),
        None,
    ),
    "progress": (
        progress,
        "Send `steps` notifications/progress (when the call has a progressToken), "
        "then answer 'done {steps}'.",
        _schema(
            {
                "steps": {"type": "integer", "minimum": 0},
                "delay": {"type": "number", "minimum": 0, "default": 0, "description": "Seconds per step."},
            },
            ("steps",),
        ),
        None,
    ),
    "set_tools": (
        set_tools,
        "Replace the extra dynamic tools (each behaves like echo), "
        "then send notifications/tools/list_changed.",
        _schema({"extra": {"type": "array", "items": STRING}}, ("extra",)),
        None,
    ),
    "ask_name": (ask_name, "Ask the user's name (an elicitation), then greet them.", _schema({}), None),
    "ask_client": (
        ask_client,
        "Send a request to the client; answer its response as JSON text and structuredContent. With "
        "`timeout_s`, stop waiting then and tell the client with notifications/cancelled.",
        _schema(
            {"method": STRING, "params": {"type": "object", "default": {}}, "timeout_s": {"type": "number"}},
            ("method",),
        ),
        None,
    ),
    "spawn_child": (
        spawn_child,
        "Start a grandchild `sleep 3600` (not waited for) and answer its pid. Its stdio is /dev/null unless "
        "`inherit_stdio` is true. With `setsid`, `ignore_sigterm` or `double_fork`, the grandchild is a "
        "Python process that does those things (double_fork: its parent exits) before the answer.",
        _schema(
            {
                "inherit_stdio": {"type": "boolean", "default": False},
                "setsid": {"type": "boolean", "default": False},
                "ignore_sigterm": {"type": "boolean", "default": False},
                "double_fork": {"type": "boolean", "default": False},
            }
        ),
        _schema({"pid": INTEGER}, ("pid",)),
    ),
    "environment": (
        environment,
        "The backend process's environment variables.",
        _schema({}),
        _schema({"env": {"type": "object"}}, ("env",)),
    ),
    "leak_env": (
        leak_env,
        "Put the variables whose names start with `prefix` where `how` says (see leak_env).",
        _schema(
            {"prefix": STRING, "how": {"enum": ["result", "tool_error", "error", "stderr", "log"]}},
            ("prefix", "how"),
        ),
        None,
    ),
    "client_view": (
        client_view,
        "The capabilities the client declared and the methods of the notifications it sent, in order.",
        _schema({}),
        _schema({"capabilities": {"type": "object"}, "notifications": {"type": "array"}}),
    ),
    "send_raw": (
        send_raw,
        "Write each of `messages` (any JSON values: hostile notifications, responses) to stdout as a line.",
        _schema({"messages": {"type": "array"}}, ("messages",)),
        None,
    ),
    "stderr_flood": (
        stderr_flood,
        "Write `bytes` bytes to stderr in lines of about 100 characters, then answer.",
        _schema({"bytes": {"type": "integer", "minimum": 0}}, ("bytes",)),
        None,
    ),
    "log": (
        log_message,
        "Send a notifications/message with `data` at `level` (default info), then answer.",
        _schema({"level": STRING, "data": STRING}, ("data",)),
        None,
    ),
    "freeze": (
        freeze,
        "Block the whole server process for `seconds` (default 3600): it answers nothing, not even ping.",
        _schema({"seconds": NUMBER}),
        None,
    ),
    "garbage": (
        garbage,
        "Write non-JSON, partial, non-UTF-8 and non-JSON-RPC lines and a response to an unknown id to "
        "stdout, then answer normally.",
        _schema({}),
        None,
    ),
    "big_response": (
        big_response,
        "Answer with a text of `bytes` bytes.",
        _schema({"bytes": {"type": "integer", "minimum": 0}}, ("bytes",)),
        None,
    ),
    "cancelled_requests": (
        cancelled_requests,
        "The requestId of every notifications/cancelled received so far, in order.",
        _schema({}),
        _schema({"cancelled": {"type": "array"}}, ("cancelled",)),
    ),
}


async def delete_item(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result(f"deleted {arguments['id']}")


def recording_calls(call_tool: MethodHandler, path: Path) -> MethodHandler:
    """--record-calls: each tools/call noted in `path` (one JSON line: name, arguments) as it arrives."""

    async def record_then_call(ctx: Context, params: JsonObject) -> JsonObject:
        seen = {"name": params.get("name"), "arguments": params.get("arguments")}
        with path.open("ab") as record:
            record.write(orjson.dumps(seen) + b"\n")
        return await call_tool(ctx, params)

    return record_then_call


# --- misbehaviour -------------------------------------------------------------------------------------------

OBJECT: Final = {"type": "object"}
BAD_TOOLS: Final = (  # --bad-tools: what a broken or hostile server may list besides its tools
    "not an object",
    {"name": ["echo"], "inputSchema": OBJECT},
    {"name": "line\nbreak", "inputSchema": OBJECT},
    {"name": "escape\x1b[2J", "inputSchema": OBJECT},
    {"name": "typed_description", "description": 5, "inputSchema": OBJECT},
    {"name": "no_schema"},
    {"name": "string_schema", "inputSchema": {"type": "string"}},
    {"name": "list_annotations", "inputSchema": OBJECT, "annotations": ["readOnlyHint"]},
    {"name": "echo", "description": "a second echo", "inputSchema": OBJECT},
    {"name": "fine_extra", "description": "well-formed", "inputSchema": OBJECT},
)


async def hang(ctx: Context, params: JsonObject) -> JsonObject:
    log.warning("--hang-on-initialize: never answering initialize")
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def exit_on_discover(ctx: Context, params: JsonObject) -> JsonObject:
    """What rmcp servers do with any request before initialize but ping: exit."""
    log.warning("--exit-on-discover: server/discover before initialize; exiting")
    sys.stderr.flush()
    os._exit(1)


def exit_after_first_list(server: ToolServer) -> MethodHandler:
    async def list_then_exit(ctx: Context, params: JsonObject) -> JsonObject:
        result = server.list_tools_result(params)
        await ctx.reply(result)
        log.warning("--exit-after-initialize: answered tools/list; exiting")
        server.stop(0)
        return result

    return list_then_exit


async def spew_garbage(exit_on_eof: bool) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_garbage, nursery.cancel_scope)
        await _drain_stdin()
        if not exit_on_eof:
            await trio.sleep_forever()
        nursery.cancel_scope.cancel()


async def _write_garbage(scope: trio.CancelScope) -> None:
    async with trio.lowlevel.FdStream(os.dup(1)) as stdout:
        count = 0
        while True:
            try:
                await stdout.send_all(GARBAGE[count % len(GARBAGE)] + b"\n")
            except trio.BrokenResourceError:
                scope.cancel()
                return
            count += 1
            await trio.sleep(GARBAGE_PERIOD_S)


async def _drain_stdin() -> None:
    async with trio.lowlevel.FdStream(os.dup(0)) as stdin:
        while await stdin.receive_some(65536):
            pass


# Every optional field of a tools/list entry, on one tool: the gateway must pass them through untouched.
TOOL_METADATA: Final[dict[str, JsonObject]] = {
    "echo": {
        "title": "Echo",
        "annotations": {"title": "Echo it back", "readOnlyHint": True, "idempotentHint": True},
        "extra": {
            "icons": [
                {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "sizes": ["any"]}
            ],
            "_meta": {"com.example/owner": "tests", "nested": {"kept": [1, 2, 3]}},
        },
    },
}


# --- entry --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="testbackend", help="serverInfo.name (default: testbackend)")
    parser.add_argument("--only", help="comma-separated tool names: expose only these")
    parser.add_argument("--state-file", help="append 'start <pid>' to this file at start")
    parser.add_argument("--crash-on-start", nargs="?", type=int, const=3, metavar="CODE", help="exit at once")
    parser.add_argument(
        "--crash-after-starts",
        type=int,
        metavar="N",
        help="with --state-file: exit with 3 once N starts are recorded",
    )
    parser.add_argument("--hold-while", metavar="PATH", help="before serving, wait while PATH exists")
    parser.add_argument("--hang-on-initialize", action="store_true", help="never answer initialize")
    parser.add_argument("--exit-after-initialize", action="store_true", help="exit after one tools/list")
    parser.add_argument("--exit-on-discover", action="store_true", help="exit on server/discover, as rmcp")
    parser.add_argument("--banner", action="store_true", help="print a non-JSON line on stdout first")
    parser.add_argument("--garbage-only", action="store_true", help="write only garbage lines to stdout")
    parser.add_argument("--page-size", type=int, help="paginate tools/list with this page size")
    parser.add_argument("--prompts", action="store_true", help="serve two prompts: greet and summarize")
    parser.add_argument("--resources", action="store_true", help="serve resources and a resource template")
    parser.add_argument("--instructions", help="the initialize result's instructions")
    parser.add_argument("--roots-on-start", action="store_true", help="ask for roots once initialized")
    parser.add_argument("--bad-tools", action="store_true", help="list malformed tool entries too")
    parser.add_argument("--ignore-stdin-eof", action="store_true", help="keep running after stdin ends")
    parser.add_argument("--ignore-sigterm", action="store_true", help="with --ignore-stdin-eof")
    parser.add_argument(
        "--no-trace-context", action="store_true", help="send requests to the client without trace context"
    )
    parser.add_argument("--tools-file", help="set_tools keeps its tools in this file; tools/list reads it")
    parser.add_argument(
        "--env-to-stderr", metavar="PREFIX", help="at start, log each variable named PREFIX* as an ERROR line"
    )
    parser.add_argument("--destructive", action="store_true", help="serve delete_item, marked destructive")
    parser.add_argument("--record-calls", metavar="PATH", help="append each tools/call received to PATH")
    args = parser.parse_args(argv)
    if args.ignore_sigterm and not args.ignore_stdin_eof:
        parser.error("--ignore-sigterm needs --ignore-stdin-eof")
    if args.crash_after_starts is not None and not args.state_file:
        parser.error("--crash-after-starts needs --state-file")
    if args.page_size is not None and args.page_size < 1:
        parser.error("--page-size must be at least 1")
    unknown = sorted(set(_only(args)) - set(TOOLS))
    if unknown:
        parser.error(f"--only: unknown tools: {', '.join(unknown)}")
    return args


def _only(args: argparse.Namespace) -> list[str]:
    return [name.strip() for name in (args.only or "").split(",") if name.strip()]


def build_server(args: argparse.Namespace) -> ToolServer:
    server = ToolServer(args.name, VERSION, args.instructions)
    server.page_size = args.page_size
    server.exit_on_eof = not args.ignore_stdin_eof
    server.trace_context = not args.no_trace_context
    only = set(_only(args)) or set(TOOLS)
    for name, (handler, description, input_schema, output_schema) in TOOLS.items():
        if name in only:
            server.add_tool(
                name,
                handler,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                **TOOL_METADATA.get(name, {}),
            )
    if args.bad_tools:
        server.raw_tool_entries = list(BAD_TOOLS)
    if args.hang_on_initialize:
        server.set_method("initialize", hang)
    if args.exit_after_initialize:
        server.set_method("tools/list", exit_after_first_list(server))
    if args.exit_on_discover:
        server.set_method("server/discover", exit_on_discover)
    if args.tools_file:
        TOOLS_FILE.append(Path(args.tools_file))
        server.set_method("tools/list", list_shared_tools(server, Path(args.tools_file)))
    if args.destructive:
        server.add_tool(
            "delete_item",
            delete_item,
            description="Delete the item `id` (pretend: nothing is kept).",
            input_schema=_schema({"id": STRING}, ("id",)),
            annotations={"destructiveHint": True, "readOnlyHint": False, "idempotentHint": True},
        )
    if args.record_calls:
        server.set_method("tools/call", recording_calls(server.method("tools/call"), Path(args.record_calls)))
    if args.prompts:
        serve_prompts(server)
    if args.resources:
        serve_resources(server)
    relist_roots_on_change(server, args.roots_on_start)
    server.set_method("logging/setLevel", set_log_level)
    server.extra_capabilities["logging"] = {}
    return server


async def set_log_level(ctx: Context, params: JsonObject) -> JsonObject:
    """Accepted and ignored: the log tool sends whatever level it is told to."""
    return {}


PROMPTS: Final = [
    {
        "name": "greet",
        "title": "Greeting",
        "description": "A greeting for `who`.",
        "arguments": [{"name": "who", "description": "Whom to greet.", "required": True}],
    },
    {"name": "summarize", "description": "Ask for a summary of `text`.", "arguments": [{"name": "text"}]},
]


def serve_prompts(server: ToolServer) -> None:
    """prompts/list and prompts/get, for --prompts."""

    async def list_prompts(ctx: Context, params: JsonObject) -> JsonObject:
        return {"prompts": PROMPTS}

    async def get_prompt(ctx: Context, params: JsonObject) -> JsonObject:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name not in {prompt["name"] for prompt in PROMPTS}:
            raise ToolError(-32602, f"Unknown prompt: {name}")
        text = (
            f"Hello, {arguments.get('who', 'world')}!"
            if name == "greet"
            else f"Summarize: {arguments.get('text')}"
        )
        message = {"role": "user", "content": {"type": "text", "text": f"[{server.name}] {text}"}}
        return {"description": f"{name} from {server.name}", "messages": [message]}

    async def complete(ctx: Context, params: JsonObject) -> JsonObject:
        ref, argument = params.get("ref") or {}, params.get("argument") or {}
        target = ref.get("name") or ref.get("uri")
        value = f"{argument.get('value', '')}-from-{server.name}-for-{target}"
        return {"completion": {"values": [value], "total": 1, "hasMore": False}}

    server.set_method("prompts/list", list_prompts)
    server.set_method("prompts/get", get_prompt)
    server.set_method("completion/complete", complete)
    server.extra_capabilities["prompts"] = {"listChanged": False}
    server.extra_capabilities["completions"] = {}


def serve_resources(server: ToolServer) -> None:
    """resources/list, resources/templates/list and resources/read, for --resources: a resource of its
    own (test://NAME/readme), one every test backend has (test://shared) and a template."""
    resources = [
        {"uri": f"test://{server.name}/readme", "name": "readme", "mimeType": "text/plain"},
        {"uri": "test://shared", "name": "shared", "mimeType": "text/plain"},
    ]
    templates = [{"uriTemplate": "test://{owner}/items/{id}", "name": "item", "mimeType": "text/plain"}]

    async def list_resources(ctx: Context, params: JsonObject) -> JsonObject:
        return {"resources": resources}

    async def list_templates(ctx: Context, params: JsonObject) -> JsonObject:
        return {"resourceTemplates": templates}

    async def read(ctx: Context, params: JsonObject) -> JsonObject:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri.startswith("test://"):
            raise ToolError(-32002, f"Resource not found: {uri}")
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"[{server.name}] {uri}"}]}

    subscribed: set[str] = set()

    async def subscribe(ctx: Context, params: JsonObject) -> JsonObject:
        subscribed.add(params["uri"])
        return {}

    async def unsubscribe(ctx: Context, params: JsonObject) -> JsonObject:
        subscribed.discard(params["uri"])
        return {}

    async def touch(ctx: Context, arguments: JsonObject) -> JsonObject:
        """Announce an update of `uri` (to a subscribed client only, as a server should)."""
        uri = arguments["uri"]
        if uri in subscribed:
            await ctx.server.notify("notifications/resources/updated", {"uri": uri})
        return text_result(f"touched {uri}", {"notified": uri in subscribed})

    server.set_method("resources/list", list_resources)
    server.set_method("resources/templates/list", list_templates)
    server.set_method("resources/read", read)
    server.set_method("resources/subscribe", subscribe)
    server.set_method("resources/unsubscribe", unsubscribe)
    server.add_tool(
        "touch",
        touch,
        description="Announce an update of `uri`.",
        input_schema=_schema({"uri": STRING}, ("uri",)),
    )
    server.extra_capabilities["resources"] = {"listChanged": False, "subscribe": True}


def record_start(path: str) -> int:
    """Append this start to the state file; the number of starts recorded before this one."""
    with open(path, "a+", encoding="utf-8") as state:
        state.seek(0)
        earlier = sum(1 for line in state if line.startswith("start "))
        state.write(f"start {os.getpid()}\n")
    return earlier


def hold_while(path: str) -> None:
    """A gate the tests open by deleting a file: lets them look at the gateway while this backend starts."""
    if os.path.exists(path):
        log.info("holding the start while %s exists", path)
    while os.path.exists(path):
        time.sleep(HOLD_POLL_S)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging()
    earlier = record_start(args.state_file) if args.state_file else 0
    if args.crash_after_starts is not None and earlier >= args.crash_after_starts:
        log.error("--crash-after-starts %d: start %d, exiting with 3", args.crash_after_starts, earlier + 1)
        return 3
    if args.hold_while:
        hold_while(args.hold_while)
    for line in env_lines(args.env_to_stderr) if args.env_to_stderr else ():
        log.error("starting with %s", line)
    if args.crash_on_start is not None:
        log.error("--crash-on-start: exiting with %d", args.crash_on_start)
        return args.crash_on_start
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.banner:
        os.write(1, b"testbackend starting up...\n")
    if args.garbage_only:
        trio.run(spew_garbage, not args.ignore_stdin_eof)
        return 0
    return build_server(args).run()


if __name__ == "__main__":
    raise SystemExit(main())
