"""What a hostile or broken client (or backend event) can throw at a session, and what it gets back.

Unit tests drive the Dispatcher with memory channels and a scripted backend inbox; the crash tests run a whole
Session over a scripted transport. Rules: no sleeps; wait on messages, `wait_all_tasks_blocked` and events;
virtual time (autojump_clock) wherever a timeout is involved.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import attrs
import orjson
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger
from support import DecodedOutbox

from actors.catalog import PREFIX_ON_COLLISION, Catalog, CatalogEvent
from actors.framing.lines import LineStream
from actors.middleware.base import CallOutcome, ClientInfo, Middleware, Tool, ToolCall
from actors.protocol import codec
from actors.protocol.envelopes import (
    Ask,
    BackendCommand,
    BackendEvent,
    BackendReady,
    Call,
    Cancel,
    Notify,
    Reply,
    ReplySlot,
)
from actors.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    MessageError,
)
from actors.protocol.messages import Batch, ErrorResponse, Message, Notification, Request, Response, RpcError
from actors.runtime.broadcast import Broadcast
from actors.session.client_asks import ClientAsks, refusal
from actors.session.dispatcher import NOW, Dispatcher
from actors.session.logs import LOG_SEVERITY
from actors.session.session import Session
from actors.session.settings import TOO_MANY_REQUESTS, SessionSettings

DEADLINE_S: Final = 10.0  # only a broken run gets near it
HUGE: Final = "x" * 1_000_000
MAX_LINE_BYTES: Final = 1 << 28  # the property's lines always fit: an oversized line is the transport's case
EVIL: Final = "\x00\x1b[2J\r\n" + HUGE  # control characters, then a megabyte


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


ONE: Final = {
    "tools": (tool("echo"), tool("slow")),
    "prompts": ({"name": "greet"},),
    "resources": ({"uri": "file:///a", "name": "a"},),
    "templates": ({"uriTemplate": "file:///b/{name}", "name": "b"},),
    "capabilities": {"tools": {}, "prompts": {}, "resources": {"subscribe": True}, "completions": {}},
}


# --- a dispatcher over memory channels ------------------------------------------------------------------


@attrs.define
class Harness:
    inbox: trio.MemorySendChannel[Message]
    outbox: trio.MemoryReceiveChannel[Message]
    catalog: Catalog
    backend: trio.MemoryReceiveChannel[BackendCommand]  # backend "one"'s inbox
    other: trio.MemoryReceiveChannel[BackendCommand]  # backend "two"'s
    other_calls: trio.MemorySendChannel[BackendCommand]
    events: Broadcast[BackendEvent]
    actor: Dispatcher

    async def ask(self, request_id: int | str, method: str, params: Any = None) -> Message:
        await self.inbox.send(Request(request_id, method, params))
        with trio.fail_after(DEADLINE_S):
            return await self.outbox.receive()

    async def initialize(self, version: str = "2025-11-25") -> Message:
        answer = await self.ask("init", "initialize", {"protocolVersion": version, "capabilities": {}})
        await self.inbox.send(Notification("notifications/initialized"))
        return answer

    def publish(self, event: CatalogEvent) -> None:
        if self.catalog.apply(event):
            self.catalog.watch.publish(self.catalog.view())


@asynccontextmanager
async def dispatcher(
    *,
    max_inflight: int = 256,
    backend_inbox: int = 16,
    late: bool = False,
    hold_s: float = 10.0,
    middleware: tuple[Middleware, ...] = (),
) -> AsyncIterator[Harness]:
    """Backends "one" (tools echo and slow, a prompt, a resource, a template) and "two" (its own inbox;
    still starting when `late`)."""
    inbox_send, inbox_recv = trio.open_memory_channel[Message](16)
    outbox_send, outbox_recv = trio.open_memory_channel[Message](16)
    calls, backend = trio.open_memory_channel[BackendCommand](backend_inbox)
    other_calls, other = trio.open_memory_channel[BackendCommand](16)
    _, catalog_events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["one", "two"],
        request_timeouts_s={"one": 30.0, "two": 30.0},
        rule=PREFIX_ON_COLLISION,
        inbox=catalog_events,
    )
    events = Broadcast[BackendEvent]()
    settings = SessionSettings(
        server_name="hostile-gateway",
        settle_timeout_s=hold_s,
        drain_s=5.0,
        events=events,
        middleware=middleware,
        max_inflight=max_inflight,
    )
    actor = Dispatcher(
        session="s1", inbox=inbox_recv, outbox=outbox_send, catalog=catalog.watch, settings=settings
    )
    harness = Harness(
        inbox_send,
        DecodedOutbox(outbox_recv),
        catalog,
        backend,
        other,
        other_calls,
        events,
        actor,  # type: ignore[arg-type]
    )
    harness.publish(BackendReady("one", calls=calls, **ONE))  # type: ignore[arg-type]
    if not late:
        harness.publish(BackendReady("two", (tool("other"),), other_calls))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield harness
        nursery.cancel_scope.cancel()


@contextmanager
def captured_logs(level: str = "WARNING") -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level=level, format="{level} {message}")
    try:
        yield lines
    finally:
        logger.remove(sink)


def error_of(message: Message) -> Any:
    assert isinstance(message, ErrorResponse), message
    return message.error


def field_of(message: Message) -> str:
    """The field an Invalid params error names (checked in its message too)."""
    error = error_of(message)
    assert error.code == INVALID_PARAMS, error
    assert error.data["field"] in error.message
    field: str = error.data["field"]
    return field


# --- 1. every field a client sends: wrong type, huge, control characters --------------------------------


async def test_a_cancel_whose_request_id_is_no_id_is_dropped_and_the_session_serves_on() -> None:
    with captured_logs() as logs:
        async with dispatcher() as h:
            await h.initialize()
            await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))
            call = await h.backend.receive()
            assert isinstance(call, Call)
            for bad in ({"a": 1}, [1], 1.5, True, None):  # a dict id crashed the session before
                await h.inbox.send(Notification("notifications/cancelled", {"requestId": bad}))
            await h.inbox.send(Notification("notifications/cancelled", {"requestId": 1, "reason": ["x"]}))
            await h.inbox.send(Notification("notifications/cancelled", [1]))  # type: ignore[arg-type]
            assert await h.ask(2, "ping") == Response(2, {})
            call.reply_to.fill(Reply(result={"n": 1}))
            with trio.fail_after(DEADLINE_S):
                assert await h.outbox.receive() == Response(1, {"n": 1})  # none of them cancelled it
    dropped = [line for line in logs if "dropped 'notifications/cancelled' from the client" in line]
    assert len(dropped) == 7


async def test_set_level_with_a_level_that_is_no_level_is_invalid_params() -> None:
    async with dispatcher() as h:
        await h.initialize()
        for n, bad in enumerate(([], {}, 3, None, True, "verbose", "INFO", EVIL)):
            assert field_of(await h.ask(n, "logging/setLevel", {"level": bad})) == "level"
        assert await h.ask("ok", "logging/setLevel", {"level": "debug"}) == Response("ok", {})


WRONG_FIELDS: Final = [
    ("tools/call", {"name": ["echo"]}, "name"),
    ("tools/call", {"name": None}, "name"),
    ("tools/call", {"name": "echo", "arguments": ["x"]}, "arguments"),
    ("tools/call", {"name": "echo", "arguments": "x"}, "arguments"),
    ("tools/call", {"name": "echo", "_meta": ["t"]}, "_meta"),
    ("tools/call", {"name": "echo", "_meta": {"progressToken": {"a": 1}}}, "_meta.progressToken"),
    ("tools/call", {"name": "echo", "_meta": {"progressToken": True}}, "_meta.progressToken"),
    ("tools/call", {"name": "echo", "_meta": {"progressToken": 1.5}}, "_meta.progressToken"),
    ("prompts/get", {"name": {"n": 1}}, "name"),
    ("prompts/get", {"name": "greet", "arguments": [1]}, "arguments"),
    ("resources/read", {"uri": ["file:///a"]}, "uri"),
    ("resources/read", {"uri": "file:///b/" + HUGE}, "uri"),
    ("resources/subscribe", {"uri": {"u": 1}}, "uri"),
    ("resources/unsubscribe", {"uri": 7}, "uri"),
    ("completion/complete", {"ref": ["ref/prompt"]}, "ref"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": []}}, "ref.name"),
    ("completion/complete", {"ref": {"type": "ref/resource", "uri": 5}}, "ref.uri"),
    ("completion/complete", {"ref": {"type": ["ref/prompt"]}}, "ref.type"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": "x"}, "argument"),
    ("tools/list", {"cursor": ["c"]}, "cursor"),
    ("tools/list", {"cursor": HUGE}, "cursor"),
    ("prompts/list", {"cursor": {"c": 1}}, "cursor"),
    ("resources/list", {"cursor": 10**30}, "cursor"),
    ("resources/templates/list", {"cursor": True}, "cursor"),
    ("logging/setLevel", {"level": ["info"]}, "level"),
    ("tools/list", [1, 2], "params"),
    ("ping", {"_meta": 5}, None),  # ping is answered whatever its params
]


@pytest.mark.parametrize(("method", "params", "field"), WRONG_FIELDS)
async def test_a_field_of_the_wrong_type_or_size_is_invalid_params_naming_it(
    method: str, params: Any, field: str | None
) -> None:
    async with dispatcher() as h:
        await h.initialize()
        answer = await h.ask(1, method, params)
        if field is None:
            assert answer == Response(1, {})
        else:
            assert field_of(answer) == field
            assert len(codec.encode(answer)) < 1000  # a huge value is not echoed back
        assert h.backend.statistics().current_buffer_used == 0  # nothing reached the backend
        assert await h.ask(2, "ping") == Response(2, {})


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"protocolVersion": ["2025-11-25"]}, "protocolVersion"),
        ({"protocolVersion": "2025-11-25", "capabilities": ["sampling"]}, "capabilities"),
        ({"protocolVersion": "2025-11-25", "clientInfo": "me"}, "clientInfo"),
    ],
)
async def test_an_initialize_with_a_field_of_the_wrong_type_is_refused_and_may_be_sent_again(
    params: dict[str, Any], field: str
) -> None:
    async with dispatcher() as h:
        assert field_of(await h.ask(1, "initialize", params)) == field
        assert isinstance(await h.initialize(), Response)


async def test_huge_values_and_control_characters_are_quoted_back_clipped() -> None:
    async with dispatcher() as h:
        await h.initialize()
        answers = [
            await h.ask(1, EVIL),
            await h.ask(2, "tools/call", {"name": EVIL}),
            await h.ask(3, "prompts/get", {"name": EVIL}),
            await h.ask(4, "resources/read", {"uri": EVIL[:5000]}),
            await h.ask(5, "completion/complete", {"ref": {"type": "ref/prompt", "name": EVIL}}),
        ]
        for answer in answers:
            assert isinstance(answer, ErrorResponse)
            assert len(answer.error.message) < 500 and len(orjson.dumps(answer.error.data)) < 6000
        assert await h.ask(6, "ping") == Response(6, {})


async def test_a_cancel_reason_reaches_the_backend_clipped() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))
        call = await h.backend.receive()
        await h.inbox.send(Notification("notifications/cancelled", {"requestId": 1, "reason": EVIL}))
        cancel = await h.backend.receive()
        assert isinstance(call, Call) and isinstance(cancel, Cancel) and cancel.call_id == call.call_id
        assert len(cancel.reason) < 400


async def test_roots_list_changed_reaches_backends_without_what_the_client_added() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Notification("notifications/roots/list_changed", {"junk": HUGE}))
        notify = await h.backend.receive()
        assert isinstance(notify, Notify)
        assert notify.notification == Notification("notifications/roots/list_changed")


async def test_a_flood_of_bad_notifications_is_logged_at_a_bounded_rate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with captured_logs() as logs:
        async with dispatcher() as h:
            await h.initialize()
            for _ in range(1000):
                await h.inbox.send(Notification("notifications/cancelled", {"requestId": []}))
            assert await h.ask(1, "ping") == Response(1, {})
    dropped = [line for line in logs if "dropped" in line]
    assert 1 <= len(dropped) <= 10  # the limiter's burst; virtual time did not move


async def test_notifications_initialized_sent_again_and_again_during_the_hold_starts_one_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with dispatcher(late=True) as h:
        await h.inbox.send(Request(0, "initialize", {"protocolVersion": "2025-11-25"}))
        for _ in range(500):
            await h.inbox.send(Notification("notifications/initialized"))
        await trio.testing.wait_all_tasks_blocked()
        assert len(h.actor.background.child_tasks) <= 3  # the mailbox reader, one waiter, no more
        h.publish(BackendReady("two", (tool("other"),), h.other_calls))
        with trio.fail_after(DEADLINE_S):
            assert isinstance(await h.outbox.receive(), Response)


class ToolsThatAreNot(Middleware):
    def filter_tools(self, client: ClientInfo, tools: Sequence[Tool]) -> Sequence[Tool]:
        return [*tools, "not a tool"]  # type: ignore[list-item]


class RefusesWithAString(Middleware):
    async def before_call(self, call: ToolCall) -> RpcError | None:
        return "no"  # type: ignore[return-value]


class ArgumentsNoJsonCanHold(Middleware):
    async def before_call(self, call: ToolCall) -> RpcError | None:
        call.arguments = {"a set": {1, 2}}
        return None


class OutcomeOfAnotherKind(Middleware):
    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        return CallOutcome(error="an error that is a string")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "middleware", [ToolsThatAreNot(), RefusesWithAString(), ArgumentsNoJsonCanHold(), OutcomeOfAnotherKind()]
)
async def test_middleware_that_returns_what_cannot_be_sent_fails_the_call_not_the_session(
    middleware: Middleware,
) -> None:
    async with dispatcher(middleware=(middleware,)) as h, trio.open_nursery() as backend:
        backend.start_soon(_fake_backend, h.backend)  # a call that gets through is answered
        await h.initialize()
        called = error_of(await h.ask(1, "tools/call", {"name": "echo", "arguments": {}}))
        if isinstance(middleware, ToolsThatAreNot):  # a failed filter hides every tool
            assert called.code == INVALID_PARAMS
            assert error_of(await h.ask(2, "tools/list")).code == INTERNAL_ERROR
        else:
            assert called.code == INTERNAL_ERROR and "middleware" in called.message
        assert await h.ask(3, "ping") == Response(3, {})
        backend.cancel_scope.cancel()


async def test_a_session_may_hold_only_so_many_subscriptions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actors.session.resources.MAX_SUBSCRIPTIONS", 2)
    async with dispatcher() as h, trio.open_nursery() as backend:
        backend.start_soon(_fake_backend, h.backend)
        await h.initialize()
        for n in range(2):
            assert isinstance(await h.ask(n, "resources/subscribe", {"uri": f"file:///b/{n}"}), Response)
        refused = error_of(await h.ask(2, "resources/subscribe", {"uri": "file:///b/2"}))
        assert refused.code == TOO_MANY_REQUESTS and refused.data == {"limit": 2}
        assert isinstance(await h.ask(3, "resources/subscribe", {"uri": "file:///b/1"}), Response)  # again
        assert isinstance(await h.ask(4, "resources/unsubscribe", {"uri": "file:///b/0"}), Response)
        assert isinstance(await h.ask(5, "resources/subscribe", {"uri": "file:///b/2"}), Response)
        backend.cancel_scope.cancel()


# --- 2. backend events of any shape ---------------------------------------------------------------------


async def test_backend_events_of_any_shape_are_dropped_not_raised() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(1, "resources/subscribe", {"uri": "file:///a"}))
        subscribe = await h.backend.receive()
        assert isinstance(subscribe, Call)
        subscribe.reply_to.fill(Reply(result={}))
        with trio.fail_after(DEADLINE_S):
            assert await h.outbox.receive() == Response(1, {})
        for method in ("notifications/message", "notifications/resources/updated"):
            for params in ([1], "x", 5, {"level": ["info"]}, {"level": None}, {"uri": ["file:///a"]}, {}):
                h.events.publish(BackendEvent("one", Notification(method, params)))  # type: ignore[arg-type]
        good_log = Notification("notifications/message", {"level": "error", "data": "real"})
        h.events.publish(BackendEvent("one", good_log))
        h.events.publish(
            BackendEvent("one", Notification("notifications/resources/updated", {"uri": "file:///a"}))
        )
        with trio.fail_after(DEADLINE_S):
            assert await h.outbox.receive() == good_log
            assert await h.outbox.receive() == Notification(
                "notifications/resources/updated", {"uri": "file:///a"}
            )
        assert await h.ask(2, "ping") == Response(2, {})


async def test_a_modern_backends_events_reach_a_legacy_client_without_that_eras_meta_keys() -> None:
    async with dispatcher() as h:
        await h.initialize()
        meta = {"io.modelcontextprotocol/subscriptionId": 1, "io.modelcontextprotocol/serverInfo": {}, "k": 2}
        params = {"level": "error", "data": "from a modern backend", "_meta": meta}
        h.events.publish(BackendEvent("one", Notification("notifications/message", params)))
        with trio.fail_after(DEADLINE_S):
            note = await h.outbox.receive()
        assert note == Notification(
            "notifications/message", {"level": "error", "data": "from a modern backend", "_meta": {"k": 2}}
        )


# --- 4. the in-flight cap -------------------------------------------------------------------------------


async def test_a_request_past_max_inflight_is_refused_at_once_and_the_session_goes_on() -> None:
    async with dispatcher(max_inflight=3) as h:
        await h.initialize()
        calls = []
        for n in range(3):
            await h.inbox.send(Request(n, "tools/call", {"name": "slow"}))
            calls.append(await h.backend.receive())
        refused = error_of(await h.ask(3, "tools/call", {"name": "slow"}))
        assert refused.code == TOO_MANY_REQUESTS and "max_inflight 3" in refused.message
        assert refused.data == {"max_inflight": 3}
        assert await h.ask("p", "ping") == Response("p", {})  # never counted, never refused
        first = calls[0]
        assert isinstance(first, Call)
        first.reply_to.fill(Reply(result={"n": 0}))
        with trio.fail_after(DEADLINE_S):
            assert await h.outbox.receive() == Response(0, {"n": 0})
        await h.inbox.send(Request(4, "tools/call", {"name": "slow"}))
        assert isinstance(await h.backend.receive(), Call)  # room again


async def test_a_batch_counts_each_request_and_answers_those_past_the_cap_in_its_array() -> None:
    async with dispatcher(max_inflight=3) as h:
        await h.initialize("2025-03-26")
        await h.inbox.send(Request("alone", "tools/call", {"name": "slow"}))
        assert isinstance(await h.backend.receive(), Call)
        items = tuple(Request(n, "tools/call", {"name": "slow"}) for n in range(4))
        await h.inbox.send(Batch(items))
        accepted = [await h.backend.receive(), await h.backend.receive()]
        for call in accepted:
            assert isinstance(call, Call)
            call.reply_to.fill(Reply(result={"ok": True}))
        with trio.fail_after(DEADLINE_S):
            answer = await h.outbox.receive()
        assert isinstance(answer, Batch)
        by_id = {item.id: item for item in answer.items if isinstance(item, Response | ErrorResponse)}
        assert by_id[0] == Response(0, {"ok": True}) and by_id[1] == Response(1, {"ok": True})
        assert error_of(by_id[2]).code == TOO_MANY_REQUESTS and error_of(by_id[3]).code == TOO_MANY_REQUESTS
        assert len(answer.items) == 4


# --- 5. cancels and notifies for a full backend inbox ---------------------------------------------------


async def test_cancels_for_a_full_inbox_wait_in_order_before_later_calls_and_notifies_coalesce() -> None:
    async with dispatcher(backend_inbox=2) as h:
        await h.initialize()
        sent = {}
        for n in (1, 2):
            await h.inbox.send(Request(n, "tools/call", {"name": "slow"}))
            call = await h.backend.receive()
            assert isinstance(call, Call)
            sent[n] = call.call_id
        for n in (3, 4):  # these fill the backend's inbox
            await h.inbox.send(Request(n, "tools/call", {"name": "slow"}))
        await trio.testing.wait_all_tasks_blocked()
        assert h.backend.statistics().current_buffer_used == 2
        for n in (1, 2):
            await h.inbox.send(Notification("notifications/cancelled", {"requestId": n}))
        for _ in range(100):
            await h.inbox.send(Notification("notifications/roots/list_changed"))
        await h.inbox.send(Request(5, "tools/call", {"name": "slow"}))
        assert await h.ask("p", "ping") == Response("p", {})
        await trio.testing.wait_all_tasks_blocked()
        # one's backlog: two cancels and one roots list_changed (not 100); two's: one roots list_changed
        # past the 16 its inbox took
        assert h.actor.forwarder.commands.pending() == 4
        with trio.fail_after(DEADLINE_S):
            got = [await h.backend.receive() for _ in range(6)]
        kinds = [type(command).__name__ for command in got]
        assert kinds == ["Call", "Call", "Cancel", "Cancel", "Notify", "Call"]
        assert [c.call_id for c in got if isinstance(c, Cancel)] == [sent[1], sent[2]]
        last = got[-1]
        assert isinstance(last, Call) and last.method == "tools/call"
        with trio.fail_after(DEADLINE_S):
            told_two = [await h.other.receive() for _ in range(17)]
        assert all(isinstance(command, Notify) for command in told_two)
        await trio.testing.wait_all_tasks_blocked()
        assert h.actor.forwarder.commands.pending() == 0
        assert (
            h.backend.statistics().current_buffer_used == 0 and h.other.statistics().current_buffer_used == 0
        )
        for call in got:  # answered, so the end of the test cancels nothing (into an inbox nobody reads)
            if isinstance(call, Call):
                call.reply_to.fill(Reply(result={}))
        with trio.fail_after(DEADLINE_S):
            answers = [await h.outbox.receive() for _ in range(3)]
        assert sorted(a.id for a in answers if isinstance(a, Response)) == [3, 4, 5]


async def test_cancels_still_queued_when_the_session_ends_are_sent_not_lost() -> None:
    async with dispatcher(backend_inbox=1) as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))
        first = await h.backend.receive()
        await h.inbox.send(Request(2, "tools/call", {"name": "slow"}))  # fills the inbox
        await trio.testing.wait_all_tasks_blocked()
        h.actor.halt()  # both calls give up: two cancels, and no room for them
        with trio.fail_after(DEADLINE_S):
            answers = [await h.outbox.receive(), await h.outbox.receive()]
        assert sorted(a.id for a in answers if isinstance(a, ErrorResponse)) == [1, 2]
        await h.inbox.aclose()  # the dispatcher ends with the cancels queued
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(DEADLINE_S):
            got = [await h.backend.receive() for _ in range(3)]
        assert isinstance(first, Call)
        assert [type(c).__name__ for c in got] == ["Call", "Cancel", "Cancel"]
        assert {c.call_id for c in got if isinstance(c, Cancel)} == {first.call_id, got[0].call_id}  # type: ignore[union-attr]


# --- 6. the initialize hold -----------------------------------------------------------------------------


async def test_a_held_initialize_warns_once_naming_the_late_backends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with captured_logs() as logs:
        async with dispatcher(late=True, hold_s=5.0) as h:
            answer = await h.ask(0, "initialize", {"protocolVersion": "2025-11-25"})
            assert isinstance(answer, Response) and trio.current_time() >= 5.0
            assert answer.result["capabilities"]["prompts"] == {"listChanged": True}  # what one offers
    held = [line for line in logs if "initialize held" in line]
    assert len(held) == 1
    assert "two (starting)" in held[0] and "one" not in held[0].split("without")[1]


# --- 3. a session that crashes still answers ------------------------------------------------------------


class ScriptedTransport:
    """A client over memory. Frames in from `client`; an exception sent there is raised by receive (a stream
    failing in a way nobody planned for). What the session writes is decoded into `written`."""

    def __init__(self) -> None:
        self.client, self._incoming = trio.open_memory_channel[bytes | Exception](64)
        self._written_send, self.written = trio.open_memory_channel[Any](1000)
        self.hold_writes = False  # the writer's writes block (a client that does not read)
        self.fail_next_write = False

    async def receive(self) -> bytes | None:
        try:
            item = await self._incoming.receive()
        except trio.EndOfChannel:
            return None
        if isinstance(item, Exception):
            self.hold_writes = False  # the crash path must get through
            raise item
        return item

    async def send(self, frame: bytes) -> None:
        await self.send_many([frame])

    def send_nowait(self, frames: Any) -> bool:
        return False  # every frame through send_many

    async def send_many(self, frames: Any) -> None:
        if self.fail_next_write:
            self.fail_next_write = False
            raise RuntimeError("the transport broke while writing")
        if self.hold_writes:
            await trio.sleep_forever()
        for frame in frames:
            self._written_send.send_nowait(orjson.loads(frame))

    async def aclose(self) -> None:
        self._written_send.close()

    async def request(self, request_id: int | str, method: str, params: Any = None) -> None:
        await self.client.send(
            orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )

    async def reply(self) -> Any:
        with trio.fail_after(DEADLINE_S):
            return await self.written.receive()

    def rest(self) -> list[Any]:
        return [item for item in _drain(self.written)]


def _drain(channel: trio.MemoryReceiveChannel[Any]) -> Iterator[Any]:
    while True:
        try:
            yield channel.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return


@asynccontextmanager
async def crashing_session(
    version: str = "2025-11-25",
) -> AsyncIterator[tuple[Session, ScriptedTransport, trio.MemoryReceiveChannel[BackendCommand]]]:
    transport = ScriptedTransport()
    calls, backend = trio.open_memory_channel[BackendCommand](16)
    _, catalog_events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["one"], request_timeouts_s={"one": 30.0}, rule=PREFIX_ON_COLLISION, inbox=catalog_events
    )
    if catalog.apply(BackendReady("one", calls=calls, **ONE)):  # type: ignore[arg-type]
        catalog.watch.publish(catalog.view())
    session = Session(
        id="doomed",
        transport=transport,
        catalog=catalog.watch,
        settings=SessionSettings(server_name="g", settle_timeout_s=1.0, drain_s=1.0),
    )  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run_temporary)
        await transport.request("init", "initialize", {"protocolVersion": version})
        assert (await transport.reply())["id"] == "init"
        await transport.client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield session, transport, backend
        with trio.fail_after(DEADLINE_S):
            await session.done.wait()


def assert_failed(answer: Any, request_id: int | str) -> None:
    assert answer["id"] == request_id and answer["error"]["code"] == INTERNAL_ERROR, answer
    assert "reconnect" in answer["error"]["message"]


async def test_a_session_whose_stream_fails_answers_its_requests_in_flight_before_closing() -> None:
    async with crashing_session("2025-03-26") as (session, transport, backend):
        for n in (1, 2):
            await transport.request(n, "tools/call", {"name": "slow"})
        batch = [
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "slow"}} for n in (3, 4)
        ]
        await transport.client.send(orjson.dumps(batch))
        for _ in range(4):
            assert isinstance(await backend.receive(), Call)
        transport.hold_writes = True  # the writer takes the next answer and blocks on it ...
        await transport.request(5, "tools/list")
        await trio.testing.wait_all_tasks_blocked()
        await transport.request(6, "prompts/list")  # ... so this one waits in the outbox
        await trio.testing.wait_all_tasks_blocked()
        await transport.client.send(RuntimeError("the stream exploded"))
    assert session.crashed
    written = transport.rest()
    alone = {answer["id"]: answer for answer in written if isinstance(answer, dict)}
    assert_failed(alone[1], 1)
    assert_failed(alone[2], 2)
    assert alone[6]["result"]["prompts"] == [{"name": "greet"}]  # queued: written as it was
    (batch_answer,) = [answer for answer in written if isinstance(answer, list)]
    assert sorted(answer["id"] for answer in batch_answer) == [3, 4]
    for answer in batch_answer:
        assert_failed(answer, answer["id"])


async def test_a_session_whose_dispatcher_crashes_answers_every_request_it_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(dispatcher: Dispatcher, request_id: object, params: object) -> Message:
        raise RuntimeError("a bug in a handler")

    monkeypatch.setitem(NOW, "prompts/list", broken)
    with captured_logs("ERROR") as logs:
        async with crashing_session() as (session, transport, backend):
            await transport.request(1, "tools/call", {"name": "slow"})
            assert isinstance(await backend.receive(), Call)
            await transport.request(2, "prompts/list")
    assert session.crashed
    written = {answer["id"]: answer for answer in transport.rest()}
    assert_failed(written[1], 1)
    assert_failed(written[2], 2)
    assert sum("session crashed" in line and "a bug in a handler" in line for line in logs) == 1


async def test_a_session_whose_writer_crashes_answers_its_requests_in_flight() -> None:
    async with crashing_session() as (session, transport, backend):
        await transport.request(1, "tools/call", {"name": "slow"})
        assert isinstance(await backend.receive(), Call)
        transport.fail_next_write = True
        await transport.request(2, "ping")
    assert session.crashed
    written = {answer["id"]: answer for answer in transport.rest()}
    assert_failed(written[1], 1)


async def test_a_session_that_ends_normally_has_not_crashed() -> None:
    async with crashing_session() as (session, transport, _):
        await transport.request(1, "ping")
        assert (await transport.reply())["id"] == 1
        await transport.client.aclose()
    assert not session.crashed


# --- the codec and the answers of client_asks -----------------------------------------------------------


def test_a_frame_nested_past_what_can_be_written_again_is_refused_with_its_id() -> None:
    deep = b"[" * 400 + b"]" * 400
    with pytest.raises(MessageError) as refused:
        codec.decode(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":' + deep + b"}}")
    assert refused.value.request_id == 9 and refused.value.error.code == INVALID_REQUEST
    wide = b"[" + b",".join([b"[[1]]"] * 500) + b"]"  # many brackets, little depth: fine
    assert codec.decode(b'{"jsonrpc":"2.0","id":1,"result":' + wide + b"}") == Response(1, json.loads(wide))


def test_a_string_id_past_its_length_limit_is_refused_without_echoing_it() -> None:
    frame = orjson.dumps({"jsonrpc": "2.0", "id": "i" * (codec.MAX_ID_CHARS + 1), "method": "ping"})
    with pytest.raises(MessageError) as refused:
        codec.decode(frame)
    assert refused.value.request_id is None and refused.value.error.code == INVALID_REQUEST
    assert codec.decode(orjson.dumps({"jsonrpc": "2.0", "id": "i" * codec.MAX_ID_CHARS, "method": "ping"}))


def test_an_answer_that_cannot_be_written_becomes_an_internal_error_for_its_id() -> None:
    assert orjson.loads(codec.encode(Response(1, {"n": 10**30})))["error"]["code"] == INTERNAL_ERROR
    batch = orjson.loads(codec.encode(Batch((Response(1, {}), Response(2, "\ud800")))))
    assert batch[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert batch[1]["id"] == 2 and batch[1]["error"]["code"] == INTERNAL_ERROR
    with pytest.raises(TypeError):
        codec.encode(Notification("n", {"n": 10**30}))


@pytest.mark.parametrize("mode", [["url"], {"url": 1}, 5, None])
def test_an_elicitation_mode_of_any_type_is_refused_not_raised(mode: Any) -> None:
    refused = refusal("elicitation/create", {"mode": mode}, {"elicitation": {"url": {}}})
    assert refused is not None and refused.code == INVALID_PARAMS
    assert refusal("sampling/createMessage", [1], {"sampling": {}}) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("result", [[1], "text", None, 10])
async def test_a_client_answer_that_is_no_object_reaches_the_backend_as_an_error(result: Any) -> None:
    async def send(message: Message) -> None:
        pass

    asks = ClientAsks(send, {"sampling": {}})
    slot = ReplySlot()
    await asks.take(Ask(7, "alpha", "sampling/createMessage", {}, slot), operating=True)
    assert asks.settle(Response(7, result))
    reply = await slot.wait()
    assert reply.error is not None and "sampling/createMessage" in reply.error.message


# --- the property: every request gets exactly one answer, and the session serves on ---------------------


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**30, -(10**30), 2**64, 2**63])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["\x00", "\x1b[31m", "\r\n", "\u2028", HUGE, _nested(300)])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
plausible_params = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["echo", "slow", "greet", "two__x"]) | json_values,
        "arguments": json_values,
        "uri": st.sampled_from(["file:///a", "file:///b/c", "one+file:///z"]) | json_values,
        "cursor": json_values,
        "ref": st.fixed_dictionaries(
            {"type": st.sampled_from(["ref/prompt", "ref/resource"]) | json_values},
            optional={
                "name": st.just("greet") | json_values,
                "uri": st.just("file:///b/{name}") | json_values,
            },
        )
        | json_values,
        "argument": json_values,
        "level": st.sampled_from(list(LOG_SEVERITY)) | json_values,
        "protocolVersion": json_values,
        "capabilities": json_values,
        "clientInfo": json_values,
        "_meta": st.fixed_dictionaries({}, optional={"progressToken": json_values}) | json_values,
        "requestId": json_values,
        "reason": json_values,
    },
)
params = plausible_params | json_values
METHODS: Final = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "resources/subscribe",
    "resources/unsubscribe",
    "sampling/createMessage",
    "no/such/method",
]
NOTIFICATIONS: Final = [
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/roots/list_changed",
    "notifications/progress",
    "notifications/message",
    "no/such/notification",
]
messages = st.lists(
    st.tuples(st.just("request"), st.sampled_from(METHODS), params)
    | st.tuples(st.just("notification"), st.sampled_from(NOTIFICATIONS), params)
    | st.tuples(st.just("response"), json_values, json_values),
    max_size=10,
)


async def _fake_backend(inbox: trio.MemoryReceiveChannel[BackendCommand]) -> None:
    """Answers every call at once with its own params; ignores cancels and notifications."""
    async for command in inbox:
        if isinstance(command, Call):
            command.reply_to.fill(Reply(result=command.params or {}))


async def _serve_script(lines: list[bytes]) -> list[Any]:
    source, sink = trio.testing.MemoryReceiveStream(), trio.testing.MemorySendStream()
    source.put_data(b"".join(line + b"\n" for line in lines))
    source.put_eof()
    calls, backend = trio.open_memory_channel[BackendCommand](16)
    _, catalog_events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["one"], request_timeouts_s={"one": 30.0}, rule=PREFIX_ON_COLLISION, inbox=catalog_events
    )
    if catalog.apply(BackendReady("one", calls=calls, **ONE)):  # type: ignore[arg-type]
        catalog.watch.publish(catalog.view())
    settings = SessionSettings(server_name="property", settle_timeout_s=1.0, drain_s=1.0, max_inflight=4)
    session = Session(
        id="prop",
        transport=LineStream(source, sink, MAX_LINE_BYTES),
        catalog=catalog.watch,
        settings=settings,
    )
    with trio.fail_after(DEADLINE_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_fake_backend, backend)
            await session.run()  # a crash raises here and fails the example
            nursery.cancel_scope.cancel()
    output: list[Any] = []
    for line in sink.get_data_nowait().splitlines():
        decoded = orjson.loads(line)
        output += decoded if isinstance(decoded, list) else [decoded]
    return output


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(messages, st.sampled_from(["2025-11-25", "2025-03-26"]), st.booleans())
def test_every_request_of_any_shape_gets_exactly_one_answer_and_the_session_serves_on(
    script: list[tuple[str, Any, Any]], version: str, batched: bool
) -> None:
    ours = [f"r{n}" for n in range(len(script))]
    wire: list[dict[str, Any]] = []
    requests = []
    for request_id, (kind, method, payload) in zip(ours, script, strict=True):
        if kind == "request":
            wire.append({"jsonrpc": "2.0", "id": request_id, "method": method, "params": payload})
            requests.append(request_id)
        elif kind == "notification":
            if isinstance(payload, dict) and payload.get("requestId") in ours:
                payload = {**payload, "requestId": "not ours"}  # a cancelled request is owed nothing
            wire.append({"jsonrpc": "2.0", "method": method, "params": payload})
        else:
            if method in ours:
                method = "not ours"
            wire.append({"jsonrpc": "2.0", "id": method, "result": payload})
    initialize = {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {"protocolVersion": version},
    }
    lines = [orjson.dumps(initialize), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    if batched and version == "2025-03-26" and wire:
        lines.append(json.dumps(wire).encode())
    else:
        lines += [json.dumps(message).encode() for message in wire]  # json: it writes integers of any size
    lines.append(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
    output = trio.run(_serve_script, lines)
    answered = [message.get("id") for message in output if "method" not in message]
    for request_id in requests:
        assert answered.count(request_id) == 1, (request_id, [str(m)[:300] for m in output])
    assert {"jsonrpc": "2.0", "id": "last", "result": {}} in output


async def test_a_call_a_backend_never_takes_from_its_full_inbox_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A backend that stopped reading its input keeps its inbox full: the call waiting for room is answered
    with REQUEST_TIMEOUT after request_timeout_s, as the connection's sweep would once it had it."""
    async with dispatcher(backend_inbox=1) as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))  # fills the inbox; nobody takes it
        await h.inbox.send(Request(2, "tools/call", {"name": "slow"}))
        with trio.fail_after(60.0):
            answer = await h.outbox.receive()
        assert isinstance(answer, ErrorResponse) and answer.id == 2
        assert answer.error.code == REQUEST_TIMEOUT and "within 30.0s" in answer.error.message
        assert trio.current_time() >= 30.0
