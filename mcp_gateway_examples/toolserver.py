"""A tiny stdio MCP server kit on Trio: tools only, newline-delimited JSON-RPC 2.0 on stdin/stdout.

stdout carries protocol only (one JSON object per line, one writer under a lock); logs go to stderr.
Every incoming request runs in its own task, so a slow tool never blocks `ping` or another call;
`notifications/cancelled` cancels that request's task and no response is sent for it.
EOF on stdin cancels everything and `run()` returns 0.

    server = ToolServer("demo", "1.0.0")

    @server.tool("echo", description="Echo the text back.", input_schema={...})
    async def echo(ctx: Context, arguments: JsonObject) -> JsonObject:
        return text_result(arguments["text"])

    raise SystemExit(server.run())

Needs nothing but Trio, orjson and the standard library.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import trio

log = logging.getLogger("toolserver")

Json = Any
JsonObject = dict[str, Any]
RequestId = str | int

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

LATEST_VERSION: Final = "2025-11-25"
SUPPORTED_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

READ_CHUNK: Final = 65536
LOG_LEVEL_ENV: Final = "TOOLSERVER_LOG_LEVEL"
TRACE_KEYS: Final = ("traceparent", "tracestate")  # W3C trace context, carried in _meta

ToolHandler = Callable[["Context", JsonObject], Awaitable[JsonObject]]
MethodHandler = Callable[["Context", JsonObject], Awaitable[JsonObject]]
NotificationHandler = Callable[[JsonObject], Awaitable[None]]


class ToolError(Exception):
    """Raise from a handler to answer the request with this JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str, data: Json = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def object_schema(properties: JsonObject, *required: str) -> JsonObject:
    """A closed JSON Schema object: these properties, these required, nothing else."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def tool_hints(*, read_only: bool, destructive: bool = False, idempotent: bool = True) -> JsonObject:
    """Tool annotations for a tool that touches nothing outside its own process or files."""
    return {
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": False,
    }


def text_result(text: str, structured: JsonObject | None = None, is_error: bool = False) -> JsonObject:
    """A CallToolResult with one text block, optional structuredContent and the isError flag."""
    result: JsonObject = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        result["structuredContent"] = structured
    if is_error:
        result["isError"] = True
    return result


def negotiate_version(requested: object) -> str:
    """Echo a version we support; otherwise offer the newest one."""
    return requested if isinstance(requested, str) and requested in SUPPORTED_VERSIONS else LATEST_VERSION


# --- a small JSON Schema subset, enough to check tool arguments ---------------------------------------------

_TYPE_CHECKS: Final[dict[str, Callable[[Json], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    ),
}


def _check_type(schema: JsonObject, value: Json, where: str) -> list[str]:
    wanted = schema.get("type")
    if wanted is None:
        return []
    names = wanted if isinstance(wanted, list) else [wanted]
    if any(_TYPE_CHECKS.get(name, lambda _v: True)(value) for name in names):
        return []
    return [f"{where} must be of type {' or '.join(names)}"]


def _check_bounds(schema: JsonObject, value: Json, where: str) -> list[str]:
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {', '.join(map(repr, schema['enum']))}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where} must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where} must be <= {schema['maximum']}")
    sized = value if isinstance(value, str | list) else None
    if sized is not None:
        if len(sized) < schema.get("minLength", schema.get("minItems", 0)):
            errors.append(f"{where} is too short")
        if len(sized) > schema.get("maxLength", schema.get("maxItems", math.inf)):
            errors.append(f"{where} is too long")
    return errors


def _check_object(schema: JsonObject, value: JsonObject, where: str) -> list[str]:
    errors = [f"{where}.{key} is required" for key in schema.get("required", []) if key not in value]
    properties: JsonObject = schema.get("properties", {})
    for key, item in value.items():
        if key in properties:
            errors.extend(validate(properties[key], item, f"{where}.{key}"))
        elif schema.get("additionalProperties", True) is False:
            errors.append(f"{where}.{key} is not allowed")
    return errors


def validate(schema: JsonObject, value: Json, where: str = "arguments") -> list[str]:
    """Check `value` against a JSON Schema subset (type, enum, bounds, lengths, properties, required,
    additionalProperties: false, items). Returns readable error strings; empty when the value fits."""
    errors = _check_type(schema, value, where)
    if errors:
        return errors
    errors = _check_bounds(schema, value, where)
    if isinstance(value, dict):
        errors.extend(_check_object(schema, value, where))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors.extend(validate(schema["items"], item, f"{where}[{index}]"))
    return errors


# --- tools and the per-request context ----------------------------------------------------------------------


@dataclass
class Tool:
    name: str
    handler: ToolHandler
    description: str
    input_schema: JsonObject
    output_schema: JsonObject | None = None
    annotations: JsonObject | None = None
    title: str | None = None
    extra: JsonObject | None = None  # any other fields of the entry (icons, _meta, ...)

    def describe(self) -> JsonObject:
        """The tool's entry in a tools/list result."""
        entry: JsonObject = {"name": self.name}
        if self.title is not None:
            entry["title"] = self.title
        entry["description"] = self.description
        entry["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        if self.annotations is not None:
            entry["annotations"] = self.annotations
        if self.extra:
            entry.update(self.extra)
        return entry


@dataclass
class Context:
    """What a handler gets besides its arguments: the server, the request and a way to talk back."""

    server: ToolServer
    request_id: RequestId
    method: str
    progress_token: str | int | None = None
    replied: bool = False
    # the W3C trace context (traceparent, tracestate) the request came with: what this server sends while
    # serving it carries it on, as the official Python SDK's servers do
    trace_context: JsonObject | None = None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send notifications/progress for this request; a no-op when the caller gave no progressToken."""
        if self.progress_token is None:
            return
        params: JsonObject = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        await self.server.notify(method, params)

    async def request_client(
        self,
        method: str,
        params: JsonObject | None = None,
        timeout_s: float | None = None,
        request_id: RequestId | None = None,
    ) -> JsonObject:
        """Send a request to the client and wait for its answer: {"result": ...} or {"error": ...}. It
        carries the request's trace context in its _meta (unless the server's `trace_context` is off)."""
        if self.trace_context and self.server.trace_context:
            params = dict(params or {})
            meta = params.get("_meta")
            params["_meta"] = {**self.trace_context, **(meta if isinstance(meta, dict) else {})}
        return await self.server.request_client(method, params, timeout_s, request_id)

    async def reply(self, result: JsonObject) -> None:
        """Answer this request now (the handler may go on); its return value is then ignored."""
        self.replied = True
        await self.server.send({"jsonrpc": "2.0", "id": self.request_id, "result": result})


@dataclass
class _Pending:
    """A request this server sent to the client, waiting for the answer."""

    done: trio.Event = field(default_factory=trio.Event)
    answer: JsonObject = field(default_factory=dict)


# --- the server ---------------------------------------------------------------------------------------------


def _error(request_id: RequestId | None, code: int, message: str) -> JsonObject:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class ToolServer:
    """A stdio MCP server that offers tools. Register tools, then call `run()` (it calls trio.run)."""

    def __init__(self, name: str, version: str, instructions: str | None = None) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.page_size: int | None = None  # paginate tools/list when set
        self.exit_on_eof = True  # False: keep running after stdin ends (a misbehaving server)
        self.trace_context = True  # False: requests sent while serving one carry no trace context
        self.client_info: JsonObject = {}
        self.client_capabilities: JsonObject = {}
        self.extra_capabilities: JsonObject = {}  # beside tools, for servers that add methods of their own
        self.initialized = False
        self._tools: dict[str, Tool] = {}
        self._methods: dict[str, MethodHandler] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }
        self.notification_handlers: dict[str, NotificationHandler] = {}  # run as a task each
        self._in_flight: dict[RequestId, trio.CancelScope] = {}
        self._pending: dict[RequestId, _Pending] = {}
        self._next_id = 0
        self._exit_code = 0
        self._stopping = False
        self._nursery: trio.Nursery | None = None
        self._stdout: trio.lowlevel.FdStream | None = None
        self._write_lock = trio.Lock()
        self.cancel_notices: list[Json] = []  # every requestId of a notifications/cancelled, in order
        self.notices: list[str] = []  # the method of every notification received, in order
        self.raw_tool_entries: list[Json] = []  # listed after the tools as they are (a broken server's)
        self._write_scope: trio.CancelScope | None = None

    # registration ---------------------------------------------------------------------------------------

    def add_tool(
        self,
        name: str,
        handler: ToolHandler,
        *,
        description: str,
        input_schema: JsonObject,
        output_schema: JsonObject | None = None,
        annotations: JsonObject | None = None,
        title: str | None = None,
        extra: JsonObject | None = None,
    ) -> Tool:
        """Add (or replace) a tool. Call `await tools_changed()` afterwards when a client is connected."""
        tool = Tool(name, handler, description, input_schema, output_schema, annotations, title, extra)
        self._tools[name] = tool
        return tool

    def tool(
        self,
        name: str,
        *,
        description: str,
        input_schema: JsonObject,
        output_schema: JsonObject | None = None,
        annotations: JsonObject | None = None,
        title: str | None = None,
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Decorator form of `add_tool`."""

        def register(handler: ToolHandler) -> ToolHandler:
            self.add_tool(
                name,
                handler,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=annotations,
                title=title,
            )
            return handler

        return register

    def remove_tool(self, name: str) -> bool:
        return self._tools.pop(name, None) is not None

    def tool_names(self) -> list[str]:
        return list(self._tools)

    def set_method(self, method: str, handler: MethodHandler) -> None:
        """Replace or add the handler of a request method (e.g. to make a deliberately broken server)."""
        self._methods[method] = handler

    def method(self, method: str) -> MethodHandler:
        """The handler of a request method now (to wrap it: set_method with a handler that calls it)."""
        return self._methods[method]

    def list_tools_result(self, params: JsonObject) -> JsonObject:
        """A tools/list result: every tool, or one page of `page_size` when pagination is on."""
        tools = [tool.describe() for tool in self._tools.values()] + self.raw_tool_entries
        if self.page_size is None:
            return {"tools": tools}
        start = _parse_cursor(params.get("cursor"), len(tools))
        end = start + self.page_size
        result: JsonObject = {"tools": tools[start:end]}
        if end < len(tools):
            result["nextCursor"] = str(end)
        return result

    # talking to the client ------------------------------------------------------------------------------

    async def send(self, message: JsonObject) -> None:
        """Write one message as one line. Writes are serialised and never cut in half by a cancellation."""
        await self.send_raw(_encode(message))

    async def send_raw(self, data: bytes) -> None:
        """Write bytes to stdout as they are (a test backend uses this to misbehave)."""
        async with self._write_lock:
            if self._stdout is None:
                log.warning("not serving; dropped %s", data[:200])
                return
            with trio.CancelScope(shield=not self._stopping) as scope:
                self._write_scope = scope
                try:
                    await self._stdout.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    log.info("stdout is closed; stopping")
                    self.stop(0)
                finally:
                    self._write_scope = None

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def tools_changed(self) -> None:
        """Tell the client the tool list changed (notifications/tools/list_changed)."""
        await self.notify("notifications/tools/list_changed")

    async def request_client(
        self,
        method: str,
        params: JsonObject | None = None,
        timeout_s: float | None = None,
        request_id: RequestId | None = None,
    ) -> JsonObject:
        """Send a request to the client; wait for {"result": ...} or {"error": ...}. When the wait ends
        early (timeout_s passed, or the caller was cancelled) the client is told with
        notifications/cancelled. The request's id is the next number, or `request_id` when given (one
        that no pending request of this server has)."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        elif request_id in self._pending:
            raise ValueError(f"request id {request_id!r} is taken by a pending request")
        pending = _Pending()
        self._pending[request_id] = pending
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send(message)
            with trio.move_on_after(math.inf if timeout_s is None else timeout_s) as waited:
                await pending.done.wait()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self._withdraw(request_id, "the request that needed it was cancelled")
            raise
        finally:
            self._pending.pop(request_id, None)
        if waited.cancelled_caught:
            await self._withdraw(request_id, f"no answer within {timeout_s}s")
            return {"error": {"code": -32001, "message": f"no answer within {timeout_s}s"}}
        return pending.answer

    async def _withdraw(self, request_id: RequestId, reason: str) -> None:
        await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    def stop(self, code: int = 0) -> None:
        """Cancel everything; `run()` returns `code`."""
        if self._stopping:
            return
        self._stopping = True
        self._exit_code = code
        if self._write_scope is not None:
            self._write_scope.shield = False
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # running --------------------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve on stdin/stdout until stdin ends (or `stop`). Returns the process exit code."""
        setup_logging()
        log.info("%s %s serving MCP on stdio (pid %d)", self.name, self.version, os.getpid())
        try:
            code = trio.run(self.serve)
        except KeyboardInterrupt:
            return 130
        log.info("%s stopped (exit %d)", self.name, code)
        return code

    async def serve(self) -> int:
        stdin = trio.lowlevel.FdStream(os.dup(0))
        self._stdout = trio.lowlevel.FdStream(os.dup(1))
        async with stdin, self._stdout, trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._read_until_eof(stdin, nursery)
            if not self.exit_on_eof:
                log.warning("stdin ended; staying up anyway (exit_on_eof is off)")
                await trio.sleep_forever()
            self.stop(0)
        self._stdout = None
        return self._exit_code

    async def _read_until_eof(self, stdin: trio.lowlevel.FdStream, nursery: trio.Nursery) -> None:
        buffer = bytearray()
        while chunk := await stdin.receive_some(READ_CHUNK):
            scanned = len(buffer)  # the bytes before this chunk hold no newline: don't scan them again
            buffer += chunk
            while (end := buffer.find(b"\n", scanned)) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                scanned = 0
                await self._on_line(line, nursery)
        if buffer.strip():
            await self._on_line(bytes(buffer), nursery)
        log.info("stdin ended")

    async def _on_line(self, line: bytes, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            log.warning("unparseable line: %r", line[:200])
            await self.send(_error(None, PARSE_ERROR, f"Parse error: {exc}"))
            return
        if not isinstance(message, dict):
            await self.send(_error(None, INVALID_REQUEST, "Invalid request: expected a JSON object"))
            return
        await self._on_message(message, nursery)

    async def _on_message(self, message: JsonObject, nursery: trio.Nursery) -> None:
        raw_id = message.get("id")
        method = message.get("method")
        if message.get("jsonrpc") != "2.0":
            await self.send(_error(raw_id if _is_id(raw_id) else None, INVALID_REQUEST, "Invalid request"))
        elif isinstance(method, str) and "id" not in message:
            self._on_notification(method, message.get("params") or {})
        elif isinstance(method, str) and _is_id(raw_id):
            self._start_request(raw_id, method, message.get("params"), nursery)
        elif _is_id(raw_id) and ("result" in message or "error" in message):
            self._on_response(raw_id, message)
        else:
            await self.send(_error(raw_id if _is_id(raw_id) else None, INVALID_REQUEST, "Invalid request"))

    def _on_notification(self, method: str, params: JsonObject) -> None:
        self.notices.append(method)
        if method == "notifications/initialized":
            self.initialized = True
            if method in self.notification_handlers and self._nursery is not None:
                self._nursery.start_soon(self.notification_handlers[method], params)
        elif method == "notifications/cancelled":
            self._cancel(params.get("requestId") if isinstance(params, dict) else None)
        elif method in self.notification_handlers and self._nursery is not None:
            self._nursery.start_soon(self.notification_handlers[method], params)
        else:
            log.debug("ignored notification %s", method)

    def _cancel(self, request_id: Json) -> None:
        self.cancel_notices.append(request_id)
        scope = self._in_flight.get(request_id) if _is_id(request_id) else None
        if scope is None:
            log.debug("cancel for unknown or finished request %r", request_id)
            return
        log.info("request %r cancelled by the client", request_id)
        scope.cancel()

    def _on_response(self, request_id: RequestId, message: JsonObject) -> None:
        pending = self._pending.get(request_id)
        if pending is None:
            log.warning("response to unknown request %r", request_id)
            return
        pending.answer = {"result": message["result"]} if "result" in message else {"error": message["error"]}
        pending.done.set()

    def _start_request(self, request_id: RequestId, method: str, params: Json, nursery: trio.Nursery) -> None:
        # The scope exists before the task starts, so a cancellation arriving right behind it still finds it.
        scope = trio.CancelScope()
        if request_id in self._in_flight:
            log.warning("request id %r reused while in flight", request_id)
        self._in_flight[request_id] = scope
        nursery.start_soon(self._run_request, scope, request_id, method, params)

    async def _run_request(
        self, scope: trio.CancelScope, request_id: RequestId, method: str, params: Json
    ) -> None:
        ctx = Context(self, request_id, method, _progress_token(params), trace_context=_trace_context(params))
        try:
            with scope:
                reply = await self._answer(ctx, params)
            if scope.cancelled_caught:
                log.debug("request %r cancelled; no response", request_id)
            elif not ctx.replied:
                await self.send(reply)
        finally:
            if self._in_flight.get(request_id) is scope:
                del self._in_flight[request_id]

    async def _answer(self, ctx: Context, params: Json) -> JsonObject:
        handler = self._methods.get(ctx.method)
        if handler is None:
            return _error(ctx.request_id, METHOD_NOT_FOUND, f"Method not found: {ctx.method}")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(ctx.request_id, INVALID_PARAMS, "Invalid params: expected an object")
        try:
            result = await handler(ctx, params)
        except ToolError as exc:
            return {"jsonrpc": "2.0", "id": ctx.request_id, "error": exc.to_error()}
        except Exception as exc:
            log.exception("%s (request %r) failed", ctx.method, ctx.request_id)
            return _error(ctx.request_id, INTERNAL_ERROR, f"Internal error: {exc}")
        return {"jsonrpc": "2.0", "id": ctx.request_id, "result": result}

    # the MCP methods ------------------------------------------------------------------------------------

    async def _initialize(self, ctx: Context, params: JsonObject) -> JsonObject:
        self.client_info = params.get("clientInfo") or {}
        self.client_capabilities = params.get("capabilities") or {}
        result: JsonObject = {
            "protocolVersion": negotiate_version(params.get("protocolVersion")),
            "capabilities": {"tools": {"listChanged": True}, **self.extra_capabilities},
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def _ping(self, ctx: Context, params: JsonObject) -> JsonObject:
        return {}

    async def _list_tools(self, ctx: Context, params: JsonObject) -> JsonObject:
        return self.list_tools_result(params)

    async def _call_tool(self, ctx: Context, params: JsonObject) -> JsonObject:
        name = params.get("name")
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise ToolError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, dict):
            raise ToolError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        errors = validate(tool.input_schema, arguments)
        if errors:
            return text_result("Invalid arguments: " + "; ".join(errors), is_error=True)
        return await tool.handler(ctx, arguments)


def _parse_cursor(cursor: Json, count: int) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str) and cursor.isdigit() and int(cursor) <= count:
        return int(cursor)
    raise ToolError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}")


def _progress_token(params: Json) -> str | int | None:
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if _is_id(token) else None


def _trace_context(params: Json) -> JsonObject | None:
    """The request's W3C trace context keys (traceparent, tracestate), when it has any."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    context = {key: meta[key] for key in TRACE_KEYS if isinstance(meta.get(key), str)}
    return context or None


def _encode(message: JsonObject) -> bytes:
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError as exc:  # e.g. an integer beyond 64 bits in a result
        log.error("cannot encode a message: %s", exc)
        if "id" not in message:
            raise
        fallback = _error(message["id"], INTERNAL_ERROR, f"Internal error: unencodable result: {exc}")
        return orjson.dumps(fallback) + b"\n"


def setup_logging() -> None:
    """Log to stderr (never stdout). Level from $TOOLSERVER_LOG_LEVEL, default INFO."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get(LOG_LEVEL_ENV, "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
