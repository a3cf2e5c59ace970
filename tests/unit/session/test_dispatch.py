"""The dispatcher's state machine and routing, with memory channels and a scripted backend inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from support import DecodedOutbox

from actors.catalog import PREFIX_ON_COLLISION, Catalog, CatalogEvent
from actors.middleware import Middleware
from actors.policy import PolicyGate
from actors.protocol.envelopes import BackendCommand, BackendReady, Call, Cancel, ListChanged, Reply
from actors.protocol.errors import (
    BACKEND_UNAVAILABLE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
)
from actors.protocol.messages import ErrorResponse, Message, Notification, Request, Response
from actors.protocol.trace_context import trace_id
from actors.runtime.supervisor import ChildRestarting
from actors.session.dispatcher import Dispatcher
from actors.session.settings import SessionSettings


@attrs.define
class Harness:
    inbox: trio.MemorySendChannel[Message]
    outbox: trio.MemoryReceiveChannel[Message]
    catalog: Catalog
    backend: trio.MemoryReceiveChannel[BackendCommand]
    actor: Dispatcher | None = None

    async def ask(self, request_id: int | str, method: str, params: dict[str, Any] | None = None) -> Message:
        await self.inbox.send(Request(request_id, method, params))
        return await self.outbox.receive()

    async def initialize(self, version: str = "2025-11-25") -> Message:
        answer = await self.ask(0, "initialize", {"protocolVersion": version, "capabilities": {}})
        await self.inbox.send(Notification("notifications/initialized"))
        return answer

    def publish(self, event: CatalogEvent) -> None:
        if self.catalog.apply(event):
            self.catalog.watch.publish(self.catalog.view())


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


@asynccontextmanager
async def dispatcher(
    *,
    ready: bool = True,
    timeout_s: float = 30.0,
    middleware: tuple[Middleware, ...] = (),
    policy: PolicyGate | None = None,
) -> AsyncIterator[Harness]:
    inbox_send, inbox_recv = trio.open_memory_channel[Message](16)
    outbox_send, outbox_recv = trio.open_memory_channel[Message](16)
    calls, backend = trio.open_memory_channel[BackendCommand](16)
    _, events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(
        order=["one", "two"],
        request_timeouts_s={"one": timeout_s, "two": timeout_s},
        rule=PREFIX_ON_COLLISION,
        inbox=events,
    )
    harness = Harness(inbox_send, DecodedOutbox(outbox_recv), catalog, backend)  # type: ignore[arg-type]
    if ready:
        harness.publish(BackendReady("one", (tool("echo"), tool("slow")), calls))
        harness.publish(BackendReady("two", (tool("echo"),), calls))
    settings = SessionSettings(
        server_name="test-gateway", settle_timeout_s=60.0, drain_s=5.0, middleware=middleware, policy=policy
    )
    actor = Dispatcher(
        session="s1", inbox=inbox_recv, outbox=outbox_send, catalog=catalog.watch, settings=settings
    )
    harness.actor = actor
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield harness
        nursery.cancel_scope.cancel()


def error_code(message: Message) -> int:
    assert isinstance(message, ErrorResponse), message
    return message.error.code


async def test_before_initialize_only_initialize_and_ping() -> None:
    async with dispatcher() as h:
        assert await h.ask(1, "ping") == Response(1, {})
        assert error_code(await h.ask(2, "tools/list")) == NOT_INITIALIZED
        assert error_code(await h.ask(3, "server/discover")) == METHOD_NOT_FOUND
        assert error_code(await h.ask(4, "initialize", {})) == INVALID_PARAMS


async def test_version_negotiation() -> None:
    for requested, agreed in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("1999-01-01", "2025-11-25"),
    ]:
        async with dispatcher() as h:
            answer = await h.initialize(requested)
            assert isinstance(answer, Response)
            assert answer.result["protocolVersion"] == agreed
            assert answer.result["capabilities"] == {"tools": {"listChanged": True}}  # all the backends offer
            assert answer.result["serverInfo"]["name"] == "test-gateway"
            assert error_code(await h.ask(5, "initialize", {"protocolVersion": requested})) == INVALID_REQUEST


async def test_capabilities_and_instructions_are_those_of_the_backends_that_are_up() -> None:
    everything = {
        "tools": {},
        "prompts": {},
        "resources": {"subscribe": True},
        "completions": {},
        "logging": {},
    }
    async with dispatcher(ready=False) as h:
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (), calls, instructions="one's advice", capabilities=everything))
        h.publish(ChildRestarting("two", RuntimeError("crashed"), 0.1))
        answer = await h.initialize()
        assert isinstance(answer, Response)
        assert answer.result["capabilities"] == {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "completions": {},
            "logging": {},
        }
        assert answer.result["instructions"] == "## one\none's advice"
    async with dispatcher(ready=False) as h:
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (), calls, capabilities={"tools": {}, "resources": {}}))
        h.publish(BackendReady("two", (), calls, instructions="two's", capabilities={"tools": {}}))
        h.publish(
            ChildRestarting("one", RuntimeError("crashed"), 0.1)
        )  # down: its resources are not routable
        answer = await h.initialize()
        assert isinstance(answer, Response)
        assert answer.result["capabilities"] == {"tools": {"listChanged": True}}
        assert answer.result["instructions"] == "## two\ntwo's"


async def test_initialize_waits_for_backends_to_settle() -> None:
    async with dispatcher(ready=False) as h:
        await h.inbox.send(Request(0, "initialize", {"protocolVersion": "2025-11-25"}))
        await trio.testing.wait_all_tasks_blocked()
        assert h.outbox.statistics().current_buffer_used == 0
        assert await h.ask(1, "ping") == Response(1, {})  # ping is answered while initialize waits
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (tool("a"),), calls))
        await trio.testing.wait_all_tasks_blocked()
        assert h.outbox.statistics().current_buffer_used == 0
        h.publish(ChildRestarting("two", RuntimeError("no"), 1.0))
        answer = await h.outbox.receive()
        assert isinstance(answer, Response) and answer.id == 0


async def test_tools_list_and_call_route_to_the_owner_under_its_own_name() -> None:
    async with dispatcher() as h:
        await h.initialize()
        listed = await h.ask(1, "tools/list")
        assert isinstance(listed, Response)
        assert [t["name"] for t in listed.result["tools"]] == ["echo", "slow", "two__echo"]
        await h.inbox.send(Request("c", "tools/call", {"name": "two__echo", "arguments": {"text": "hi"}}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        assert call.params == {"name": "echo", "arguments": {"text": "hi"}}  # nothing added: see below
        call.reply_to.fill(Reply(result={"content": [], "isError": False}))
        assert await h.outbox.receive() == Response("c", {"content": [], "isError": False})


@pytest.mark.parametrize(
    ("capabilities", "traced"),
    [
        ({}, False),
        ({"experimental": {}}, False),
        ({"sampling": {}}, True),
        ({"elicitation": {"form": {}}}, True),
        ({"roots": {"listChanged": True}}, True),
    ],
)
async def test_a_call_gets_a_trace_context_of_its_own_only_when_its_client_can_be_asked(
    capabilities: dict[str, Any], traced: bool
) -> None:
    """What a backend asks while serving a call names the call by its trace (ask_owner.py); a client that
    declared nothing a backend may ask needs no such name, and its calls go out as the client sent them
    (an SDK backend pays for extracting a traceparent on every call: issue #27)."""
    async with dispatcher() as h:
        await h.ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities})
        await h.inbox.send(Notification("notifications/initialized"))
        await h.inbox.send(Request("c", "tools/call", {"name": "two__echo", "arguments": {}}))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.params is not None
        assert (trace_id(call.params) is not None) is traced
        assert (call.trace is not None) is traced and call.trace == trace_id(call.params)
        assert {key: value for key, value in call.params.items() if key != "_meta"} == {
            "name": "echo",
            "arguments": {},
        }


async def test_the_reader_takes_a_request_now_only_where_the_idle_dispatcher_would_do_the_same() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        d = h.actor
        assert not d.take_now(Request(1, "tools/list"))  # before initialize: the dispatcher answers it
        await h.initialize()
        await trio.testing.wait_all_tasks_blocked()
        assert not d.take_now(Request(2, "initialize", {"protocolVersion": "2025-11-25"}))  # waits: a task
        assert not d.take_now(Notification("notifications/roots/list_changed"))
        assert d.take_now(Request("c", "tools/call", {"name": "two__echo", "arguments": {}}))
        call = h.backend.receive_nowait()  # forwarded at once, as from the inbox
        assert isinstance(call, Call) and call.params is not None
        assert {**call.params, "_meta": {}} == {"name": "echo", "arguments": {}, "_meta": {}}
        assert d.take_now(Request("c", "tools/call", {"name": "echo"}))  # a duplicate: refused, as the
        assert error_code(await h.outbox.receive()) == INVALID_REQUEST  # dispatcher would refuse it
        assert d.take_now(Request(3, "tools/list"))
        listed = await h.outbox.receive()
        assert isinstance(listed, Response) and listed.id == 3
        h.inbox.send_nowait(Request(4, "ping"))  # handed to the dispatcher, not yet taken: it is not idle
        assert not d.take_now(Request(5, "ping"))
        assert await h.outbox.receive() == Response(4, {})
        call.reply_to.fill(Reply(result={"content": []}))
        assert await h.outbox.receive() == Response("c", {"content": []})


async def test_a_call_written_through_the_backends_door_is_answered_like_any_other() -> None:
    async with dispatcher() as h:
        written: list[Call] = []

        def call_now(call: Call) -> bool:  # the backend actor was idle and the pipe had room
            written.append(call)
            return True

        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (tool("echo"),), calls, call_now=call_now))
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "echo"}))
        await trio.testing.wait_all_tasks_blocked()
        assert [call.method for call in written] == ["tools/call"]
        written[0].reply_to.fill(Reply(result={"content": []}))
        assert await h.outbox.receive() == Response(1, {"content": []})


async def test_bad_tool_calls() -> None:
    async with dispatcher() as h:
        await h.initialize()
        assert error_code(await h.ask(1, "tools/call", {"name": "nope"})) == INVALID_PARAMS
        assert error_code(await h.ask(2, "tools/call", {"arguments": {}})) == INVALID_PARAMS
        assert error_code(await h.ask(3, "tools/list", {"cursor": "x" * 65})) == INVALID_PARAMS
        assert error_code(await h.ask(4, "completion/nothing")) == METHOD_NOT_FOUND


async def test_call_to_a_down_backend_names_it_and_its_state() -> None:
    async with dispatcher() as h:
        await h.initialize()
        h.publish(ChildRestarting("two", RuntimeError("exit 3"), 2.0))
        assert await h.outbox.receive() == Notification("notifications/tools/list_changed")
        answer = await h.ask(1, "tools/call", {"name": "two__echo"})
        assert isinstance(answer, ErrorResponse)
        assert answer.error.code == BACKEND_UNAVAILABLE
        assert answer.error.data["backend"] == "two"
        assert answer.error.data["state"] == "restarting"
        assert "two" in answer.error.message and "restarting" in answer.error.message


async def test_slow_call_blocks_neither_ping_nor_other_calls() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request("slow", "tools/call", {"name": "slow"}))
        slow = await h.backend.receive()
        assert await h.ask("p", "ping") == Response("p", {})
        await h.inbox.send(Request("fast", "tools/call", {"name": "echo"}))
        fast = await h.backend.receive()
        assert isinstance(fast, Call) and isinstance(slow, Call)
        fast.reply_to.fill(Reply(result={"n": 2}))
        assert await h.outbox.receive() == Response("fast", {"n": 2})
        slow.reply_to.fill(Reply(result={"n": 1}))
        assert await h.outbox.receive() == Response("slow", {"n": 1})


async def test_duplicate_in_flight_id_is_refused() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(9, "tools/call", {"name": "slow"}))
        await h.backend.receive()
        assert error_code(await h.ask(9, "tools/call", {"name": "echo"})) == INVALID_REQUEST


async def test_client_cancel_reaches_the_backend_and_gets_no_response() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        await h.inbox.send(Notification("notifications/cancelled", {"requestId": 1}))
        cancel = await h.backend.receive()
        assert isinstance(cancel, Cancel) and cancel.call_id == call.call_id
        assert await h.ask(2, "ping") == Response(2, {})  # nothing was sent for request 1


async def test_progress_token_is_mapped_for_the_backend() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "echo", "_meta": {"progressToken": "tok"}}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        assert call.params is not None and call.params["_meta"]["progressToken"] == call.call_id
        assert call.progress_token == "tok" and call.notify_to is not None


async def test_list_changed_goes_to_an_initialized_client() -> None:
    async with dispatcher() as h:
        await h.initialize()
        h.publish(ChildRestarting("two", None, 1.0))
        assert await h.outbox.receive() == Notification("notifications/tools/list_changed")
        h.publish(ListChanged("one", "prompts", ({"name": "greet"},)))
        assert await h.outbox.receive() == Notification("notifications/prompts/list_changed")
        assert error_code(await h.ask("p", "prompts/get", {"name": "nope"})) == INVALID_PARAMS


async def test_stop_answers_everything_in_flight() -> None:
    async with dispatcher() as h:
        await h.initialize()
        for i in range(3):
            await h.inbox.send(Request(i, "tools/call", {"name": "slow"}))
            await h.backend.receive()
        assert h.actor is not None
        h.actor.halt()  # what Session.stop() does
        answers = [await h.outbox.receive() for _ in range(3)]
        assert sorted(a.id for a in answers if isinstance(a, ErrorResponse)) == [0, 1, 2]
        assert all(error_code(a) == BACKEND_UNAVAILABLE for a in answers)


async def test_end_of_input_lets_in_flight_requests_finish() -> None:
    async with dispatcher() as h:
        await h.initialize()
        await h.inbox.send(Request(1, "tools/call", {"name": "slow"}))
        call = await h.backend.receive()
        await h.inbox.aclose()
        assert isinstance(call, Call)
        call.reply_to.fill(Reply(result={"late": True}))
        assert await h.outbox.receive() == Response(1, {"late": True})
        with trio.fail_after(1):  # the outbox ends: the dispatcher finished
            async for extra in h.outbox:
                raise AssertionError(f"unexpected {extra}")


async def test_tools_list_pages_with_an_opaque_cursor_and_refuses_a_stale_one() -> None:
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    async with dispatcher() as harness:
        harness.publish(BackendReady("one", tuple(tool(f"t{n:03}") for n in range(250)), calls))
        await harness.initialize()
        names, cursor, pages = [], None, 0
        while True:
            answer = await harness.ask(f"page-{pages}", "tools/list", {"cursor": cursor} if cursor else {})
            assert isinstance(answer, Response)
            names += [entry["name"] for entry in answer.result["tools"]]
            pages += 1
            cursor = answer.result.get("nextCursor")
            if cursor is None:
                break
        assert pages == 3 and len(names) == 251 and names[:2] == ["t000", "t001"]  # 250 and two's echo
        first = await harness.ask("again", "tools/list", {})
        assert isinstance(first, Response)
        stale = first.result["nextCursor"]
        harness.publish(BackendReady("one", (tool("only"),), calls))  # the list changes
        assert await harness.outbox.receive() == Notification("notifications/tools/list_changed")
        # A stale cursor, or one the gateway cannot read (it cannot tell them apart): -32602, never a page of
        # another version that a client would join to the pages it has (issue #34).
        for unknown in (stale, "not base64!", "", "OTk5OjA=", "\x00\n\u202e"):  # 4th: another list's
            again = await harness.ask("stale", "tools/list", {"cursor": unknown})
            assert error_code(again) == INVALID_PARAMS and "not good now" in again.error.message  # type: ignore[union-attr]
        fresh = await harness.ask("fresh", "tools/list", {})
        assert isinstance(fresh, Response) and [t["name"] for t in fresh.result["tools"]] == ["only", "echo"]
        for bad in (42, ["c"], "x" * 65):  # not a string, or longer than any of ours
            error = await harness.ask(f"bad-{bad}", "tools/list", {"cursor": bad})
            assert error_code(error) == INVALID_PARAMS
