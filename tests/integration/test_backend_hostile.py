"""A hostile backend: every field it sends is checked where it enters, a bad message is dropped (and logged,
rate-limited), nothing it sends raises out of its link, and sessions get only well-formed notifications.

The first tests drive a real backend process (the test backend's send_raw tool writes whatever lines it is
given) behind a real gateway, with two SDK clients over WebSockets; the last feed a link and a backend actor
every malformed variant of every field directly, with memory channels."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import mcp_types as types
import orjson
import pytest
import trio
from mcp import MCPError
from sdk_websocket import websocket_client
from support import DEADLINE_S, backend_entry, running, with_websocket, write_config

from actors.backends.actor import Backend
from actors.backends.connection import BackendLink
from actors.backends.errors import BackendExitedError
from actors.backends.input import is_name
from actors.backends.listing import list_all
from actors.catalog.clients import ClientDirectory
from actors.config import StdioBackend
from actors.protocol.envelopes import Ask, BackendEvent, Call, Mail, ReplySlot, Withdraw
from actors.protocol.messages import Message, Notification
from actors.protocol.versions import LOG_LEVELS
from actors.runtime.broadcast import Broadcast
from actors.runtime.log import RateLimiter

RAW: Final = "--only=send_raw,echo"
BAD_VALUES: Final = (None, True, 1.5, -1, "", "\x00\x1b[31m", [], ["x"], {}, {"a": [1]}, "x" * 5000)
HOSTILE: Final = [
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": ["info"], "data": "x"}},
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
    {"jsonrpc": "2.0", "method": "notifications/message", "params": ["info", "x"]},
    {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": ["x"]}},
    {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": ["file:///x"]},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": True, "progress": 1}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": [1], "progress": 1}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": ["$progressToken", 1]},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "$progressToken"}},
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "$progressToken", "progress": 1, "total": [2]},
    },
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": True}},
    {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": ["e"]}},
    {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {"elicitationId": {"a": 1}}},
    {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": [1]},
    {"jsonrpc": "2.0", "method": "notifications/\x1b[2Jodd", "params": {}},
    {"jsonrpc": "2.0", "id": True, "result": {}},
    {"jsonrpc": "2.0", "id": 1.5, "result": {}},
    # (an id past 64 bits cannot travel here: the client's request carrying it is refused, as
    # test_protocol checks; a backend's answer holding one is test_connection's)
    {"jsonrpc": "2.0", "id": 1.2345678901234568e29, "result": {}},
    {"jsonrpc": "2.0", "id": 99999999, "error": {"code": 1, "message": "to nobody"}},
    {
        "jsonrpc": "2.0",
        "id": "h1",
        "method": "elicitation/create",
        "params": {"mode": ["url"], "message": "m"},
    },
    {"jsonrpc": "2.0", "id": "h2", "method": "sampling/createMessage", "params": [1]},
    {"jsonrpc": "2.0", "id": "h3", "method": "bogus\x00method"},
    # The last two are well-formed: their clean forms reach the client.
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "$progressToken", "progress": 1, "total": 2, "smuggled": {"x": 1}},
    },
    {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "warning", "logger": "mine", "data": "after", "smuggled": 1},
    },
]


@attrs.define
class Seen:
    """What one SDK client received unasked: notifications, and anything its SDK could not read."""

    methods: list[str] = attrs.field(factory=list)
    logs: list[types.LoggingMessageNotificationParams] = attrs.field(factory=list)
    broken: list[Exception] = attrs.field(factory=list)
    _arrived: trio.Event = attrs.field(factory=trio.Event)

    async def handle(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.broken.append(message)
        elif (method := getattr(message, "method", None)) is not None:
            self.methods.append(method)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for_log(self, data: str) -> None:
        with trio.fail_after(DEADLINE_S):
            while not any(log.data == data for log in self.logs):
                await self._arrived.wait()


async def test_hostile_notifications_are_dropped_and_every_session_goes_on(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=send_raw,echo")])
    )
    seen_a, seen_b = Seen(), Seen()
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            websocket_client(url, message_handler=seen_a.handle, logging_callback=seen_a.log) as a,
            websocket_client(url, message_handler=seen_b.handle, logging_callback=seen_b.log) as b,
        ):
            sent = await a.call_tool("send_raw", {"messages": HOSTILE}, progress_callback=on_progress)
            assert sent.structured_content == {"sent": len(HOSTILE)}
            for seen in (seen_a, seen_b):
                await seen.wait_for_log("after")
            for client in (a, b):  # both sessions are still there
                assert (await client.call_tool("echo", {"text": "ok"})).structured_content == {"text": "ok"}
    for seen in (seen_a, seen_b):
        assert seen.broken == []
        assert [(log.level, log.logger, log.data) for log in seen.logs] == [("warning", "alpha", "after")]
    assert progress == [(1, 2, None)]  # the well-formed one, without what it smuggled


async def test_a_result_that_is_not_an_object_is_an_error_for_its_caller(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=send_raw,echo")])
    )
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            answer = {"jsonrpc": "2.0", "id": "$requestId", "result": [1, 2]}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("send_raw", {"messages": [answer]})
            assert refused.value.error.code == -32603
            assert "not an object" in refused.value.error.message
            assert (await client.call_tool("echo", {"text": "ok"})).structured_content == {"text": "ok"}


# --- the link and the backend actor, fed every malformed variant ------------------------------------------


def variants(params: dict[str, Any]) -> Iterator[Any]:
    """Each field of `params` replaced by each bad value, each field left out, and params not an object."""
    for field, bad in itertools.product(params, BAD_VALUES):
        yield {**params, field: bad}
    for field in params:
        yield {key: value for key, value in params.items() if key != field}
    yield from ([], "params", 7, [params])


NOT_UTF8: Final = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\xff"}}'
PROGRESS_FIELDS: Final = {"progressToken", "progress", "total", "message"}
GOOD: Final = {
    "notifications/progress": {"progressToken": 1, "progress": 0.5, "total": 1, "message": "half"},
    "notifications/cancelled": {"requestId": "ask-1", "reason": "gave up"},
    "notifications/elicitation/complete": {"elicitationId": "e1"},
    "notifications/message": {"level": "info", "logger": "x", "data": {"any": "json"}},
    "notifications/resources/updated": {"uri": "file:///a"},
    "notifications/tools/list_changed": {},
}


def frames() -> Iterator[bytes]:
    for method, params in GOOD.items():
        for bad in variants(params):
            yield orjson.dumps({"jsonrpc": "2.0", "method": method, "params": bad})
    for request_id in (*BAD_VALUES, 1, "1", 2**63 - 1, -(2**63)):
        for body in ({"result": {}}, {"result": [1]}, {"error": {"code": 1, "message": "m"}}):
            yield orjson.dumps({"jsonrpc": "2.0", "id": request_id, **body})
    requests = {
        "elicitation/create": {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e1"},
        "sampling/createMessage": {"messages": [], "maxTokens": 1},
    }
    for (method, params), request_id in itertools.product(requests.items(), ("ask-1", 5)):
        for bad in variants(params):
            yield orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": bad})
    yield NOT_UTF8


@attrs.define
class Feed:
    """A transport that yields the given frames, then ends; what the link writes back is kept."""

    frames: Iterator[bytes]
    written: list[bytes] = attrs.field(factory=list)

    async def receive(self) -> bytes | None:
        await trio.lowlevel.checkpoint()
        return next(self.frames, None)

    def send_nowait(self, frames: Any) -> bool:
        return False  # every frame through send_many

    async def send_many(self, frames: Any) -> None:
        self.written += frames

    async def send(self, frame: bytes) -> None:
        self.written.append(frame)

    async def aclose(self) -> None:
        pass


def is_clean(item: object) -> bool:
    """What a session may get from a backend: its known envelopes, with the fields it reads well-typed."""
    match item:
        case Ask(params=params):
            return params is None or isinstance(params, dict)
        case Withdraw(reason=reason):
            return isinstance(reason, str)
        case Notification(method="notifications/elicitation/complete", params={"elicitationId": str()}):
            return True
        case Notification(method="notifications/progress", params=params):
            return isinstance(params, dict) and set(params) <= {
                "progressToken",
                "progress",
                "total",
                "message",
            }
        case BackendEvent(notification=Notification(method="notifications/message", params=params)):
            return isinstance(params, dict) and params["level"] in LOG_LEVELS and params["logger"] == "alpha"
        case BackendEvent(notification=Notification(method="notifications/resources/updated", params=params)):
            return isinstance(params, dict) and list(params) == ["uri"] and is_name(params["uri"])
    return False


def drain(channel: trio.MemoryReceiveChannel[Any]) -> list[Any]:
    items = []
    while True:
        try:
            items.append(channel.receive_nowait())
        except trio.WouldBlock:
            return items


async def test_nothing_a_backend_sends_raises_out_of_its_link_and_sessions_get_only_clean_messages() -> None:
    session, session_inbox = trio.open_memory_channel[Mail](10_000)
    progress, progress_inbox = trio.open_memory_channel[Message](10_000)
    events, events_inbox = trio.open_memory_channel[Mail](10_000)
    clients, broadcast = ClientDirectory(), Broadcast[Mail]()
    clients.join("s", session)
    config = StdioBackend(name="alpha", command="unused")
    backend = Backend(
        config=config,
        catalog=None,
        gateway_name="gateway",
        startup_timeout_s=1.0,
        shutdown_s=1.0,  # type: ignore[arg-type]
        max_message_bytes=1 << 20,
        events=broadcast,
        clients=clients,
    )
    feed = Feed(frames())
    link = BackendLink(
        name="alpha",
        transport=feed,
        on_notification=backend._on_notification,  # type: ignore[arg-type]
        cancel_scope=trio.CancelScope(),
        clients=clients,
    )
    backend._link, backend._server_logs = link, RateLimiter(50.0)
    backend._changed = {"tools": trio.Event()}
    link.inflight[1] = Call(1, "tools/call", {}, "s", ReplySlot(), progress, "client-token", session)
    with broadcast.deliver_to(events), link.cancel_scope:  # as in a run: losing the link ends it
        async with trio.open_nursery() as nursery:
            await link.read(nursery)  # returns at the end of the frames, never raises
    assert isinstance(link.lost, BackendExitedError) and str(link.lost) == "connection closed"
    delivered = drain(session_inbox) + drain(progress_inbox) + drain(events_inbox)
    assert delivered and all(is_clean(item) for item in delivered), [i for i in delivered if not is_clean(i)]
    kinds = {type(item).__name__ for item in delivered}
    assert kinds == {"Ask", "Withdraw", "Notification", "BackendEvent"}  # the good ones did get through
    for frame in feed.written:  # every request of the backend got an answer
        assert "id" in orjson.loads(frame)


async def test_malformed_list_entries_are_left_out_and_the_rest_is_listed(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo", "--bad-tools")])
    )
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:
            listed = await client.list_tools()  # an SDK client that would refuse the whole list otherwise
    assert [tool.name for tool in listed.tools] == ["echo", "fine_extra"]
    assert listed.tools[0].description != "a second echo"  # the first of two entries named echo


@attrs.define
class Pages:
    """A link that answers each list request with the next page, and keeps what it drops."""

    pages: list[Any]
    dropped: list[str] = attrs.field(factory=list)
    list_hints: dict[str, Any] = attrs.field(factory=dict)  # what the listing's caching hints came to

    async def request(self, method: str, params: Any = None) -> Any:
        await trio.lowlevel.checkpoint()
        return self.pages.pop(0)

    def drop(self, text: str, level: str = "WARNING") -> None:
        self.dropped.append(text)


async def test_each_kind_of_list_keeps_only_its_well_formed_entries() -> None:
    resources = Pages(
        [
            {
                "resources": [
                    {"uri": "file:///a", "name": "a", "size": 3},
                    {"uri": ["file:///b"], "name": "b"},
                ],
                "nextCursor": "2",
            },
            {"resources": [{"uri": "file:///c", "name": "c", "size": True}], "nextCursor": {"page": 3}},
        ]
    )
    assert [r["uri"] for r in await list_all(resources, "resources")] == ["file:///a"]  # type: ignore[arg-type]
    assert len(resources.dropped) == 3 and "nextCursor" in resources.dropped[-1]
    templates = Pages([{"resourceTemplates": [{"uriTemplate": "file:///{x}", "name": "x"}, {"name": "no"}]}])
    assert len(await list_all(templates, "templates")) == 1  # type: ignore[arg-type]
    prompts = Pages(
        [{"prompts": [{"name": "p", "arguments": [{"name": "a"}]}, {"name": "q", "arguments": [{"x": 1}]}]}]
    )
    assert [p["name"] for p in await list_all(prompts, "prompts")] == ["p"]  # type: ignore[arg-type]
