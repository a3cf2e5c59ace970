"""The byte budgets in the dispatcher: what one request and one client may hold (counted on raw bytes), the
refusal past either (before any backend sees the request), and the ledger back at zero however a request
ends: answered, cancelled, its session ended."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
import trio.testing
from test_dispatch import Harness, dispatcher
from test_modern import modern

from actors.framing.lines import LineStream
from actors.protocol.envelopes import Ask, Call, Reply, ReplySlot
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY
from actors.protocol.messages import Batch, ErrorResponse, Message, Notification, Request, Response
from actors.session.bridge import MAX_INPUT_RESPONSES
from actors.session.budget import ByteBudget, QueuedBytes, client_of, request_bytes
from actors.session.parked import MAX_PARKED_PER_SESSION
from actors.session.reader import Reader

CALL = modern({"name": "echo", "arguments": {}})


def budget_of(h: Harness) -> ByteBudget:
    assert h.actor is not None
    return h.actor.settings.budget


async def call(h: Harness, request_id: int, size: int) -> Call:
    await h.inbox.send(Request(request_id, "tools/call", CALL, size))
    forwarded = await h.backend.receive()
    assert isinstance(forwarded, Call)
    return forwarded


async def refused(h: Harness, request_id: int, size: int) -> dict[str, Any]:
    await h.inbox.send(Request(request_id, "tools/call", CALL, size))
    answer = await h.outbox.receive()
    assert isinstance(answer, ErrorResponse) and answer.error.code == -32000, answer
    with pytest.raises(trio.WouldBlock):
        h.backend.receive_nowait()  # it never reached the backend
    return answer.error.data  # type: ignore[no-any-return]


def test_a_requests_size_is_its_frames_else_its_params_encoded() -> None:
    assert request_bytes(Request(1, "m", {"a": 1}, 4096)) == 4096
    assert request_bytes(Request(1, "m", {"a": 1})) == len(b'{"a":1}')
    assert client_of("alice", "s1") == "principal:alice" and client_of(None, "s1") == "session:s1"


async def test_a_request_at_max_request_bytes_is_taken_and_one_byte_past_is_refused() -> None:
    async with dispatcher() as h:
        budget_of(h).limit(1000, 10_000)
        taken = await call(h, 1, 1000)
        assert budget_of(h).used == {"session:s1": 1000}
        data = await refused(h, 2, 1001)
        assert data == {"budget": "max_request_bytes", "limit": 1000, "used": 1001}
        taken.reply_to.fill(Reply(result={"content": []}))
        assert isinstance(await h.outbox.receive(), Response)
        assert budget_of(h).used == {}


async def test_a_clients_requests_count_together_up_to_max_client_bytes_and_are_freed_however_they_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        async with dispatcher() as h:
            budget_of(h).limit(1000, 2500)
            answered, _ = await call(h, 1, 1000), await call(h, 2, 1000)
            data = await refused(h, 3, 1000)
            assert data == {"budget": "max_client_bytes", "limit": 2500, "used": 3000}
            left = await call(h, 4, 500)  # at the bound exactly: taken
            assert budget_of(h).used == {"session:s1": 2500}
            answered.reply_to.fill(Reply(result={"content": []}))
            assert isinstance(await h.outbox.receive(), Response)
            await h.inbox.send(Notification("notifications/cancelled", {"requestId": 2}))
            await h.backend.receive()  # the backend is told
            assert budget_of(h).used == {"session:s1": 500}
            assert left.call_id and h.actor is not None
            await h.inbox.aclose()  # the session ends with one in flight: after drain_s it is stopped
            await h.actor.inflight.wait_empty()
            assert budget_of(h).used == {}


async def test_a_modern_call_past_its_sessions_parked_share_is_refused_never_sent_unbridged() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        table = h.actor.settings.bridges
        for _ in range(MAX_PARKED_PER_SESSION):
            table.open(
                method="tools/call", params={"name": "echo"}, principal=None, capabilities={},
                responses={}, target=ReplySlot(), session="s1",
            )  # fmt: skip
        data = await refused(h, 1, 100)
        assert data == {"budget": "MAX_PARKED_PER_SESSION", "limit": 64, "used": 64}


async def test_each_request_of_a_batch_meets_the_budgets_alone() -> None:
    async with dispatcher() as h:
        await h.initialize("2025-03-26")
        budget_of(h).limit(1024, 2048)
        small = {"name": "echo", "arguments": {"text": "x" * 900}}
        big = {"name": "echo", "arguments": {"text": "x" * 1100}}
        batch = Batch(
            (Request(1, "tools/call", small), Request(2, "tools/call", big), Request(3, "tools/call", small))
        )
        await h.inbox.send(batch)
        first = await h.backend.receive()
        second = await h.backend.receive()
        assert isinstance(first, Call) and isinstance(second, Call)
        first.reply_to.fill(Reply(result={"content": []}))
        second.reply_to.fill(Reply(result={"content": []}))
        answers = await h.outbox.receive()
        assert isinstance(answers, Batch)
        by_id = {item.id: item for item in answers.items}
        assert isinstance(by_id[2], ErrorResponse) and by_id[2].error.data["budget"] == "max_request_bytes"
        assert isinstance(by_id[1], Response) and isinstance(by_id[3], Response)
        assert budget_of(h).used == {}


async def test_a_busy_dispatcher_has_at_most_one_requests_budget_decoded_ahead_of_it() -> None:
    """The reader decodes a frame only when what waits decoded in the inbox leaves room for it within
    max_request_bytes: a client's burst waits raw in its transport, not as a full inbox of decoded trees."""
    frame = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"x": "y" * 560}})
    source = trio.testing.MemoryReceiveStream()
    source.put_data(b"".join(frame + b"\n" for _ in range(3)))
    source.put_eof()
    transport = LineStream(source, trio.testing.MemorySendStream(), 4096)
    to_dispatch, inbox = trio.open_memory_channel[Message](16)
    to_writer, _written = trio.open_memory_channel[Message](16)
    queued = QueuedBytes(ByteBudget(max_request_bytes=1024, max_client_bytes=4096))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Reader(transport, to_dispatch, to_writer, queued=queued).run)
        await trio.testing.wait_all_tasks_blocked()
        assert inbox.statistics().current_buffer_used == 1 and queued.total == len(frame)
        for _ in range(3):
            await inbox.receive()
            queued.taken()  # as the dispatcher does for each message it takes
        await trio.testing.wait_all_tasks_blocked()
    assert queued.total == 0 and not queued.sizes


async def test_a_retry_that_answers_nothing_stays_parked_with_its_answers_raw_and_counted() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        asking = modern({"name": "echo", "arguments": {}})
        asking["_meta"][CLIENT_CAPABILITIES_KEY] = {"roots": {}}
        await h.inbox.send(Request("a", "tools/call", asking, 300))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.asks_to is not None
        call.asks_to.send_nowait(Ask(1, "one", "roots/list", None, ReplySlot(), "r1"))
        first = await h.outbox.receive()
        assert isinstance(first, Response) and first.result["resultType"] == "input_required"
        unasked = {"unasked": {"pad": "x" * 5000}}
        retry = {**asking, "requestState": first.result["requestState"], "inputResponses": unasked}
        await h.inbox.send(Request("b", "tools/call", retry, 5400))
        again = await h.outbox.receive()  # asked again at once: the call stays parked
        assert isinstance(again, Response) and again.result["resultType"] == "input_required"
        (parked,) = h.actor.settings.bridges.calls.values()
        assert parked.kept == {"unasked": orjson.dumps(unasked["unasked"])}
        assert budget_of(h).used == {"session:s1": parked.kept_bytes}  # the requests are over; this is kept


async def test_a_request_with_more_input_responses_than_any_round_asks_for_is_refused_naming_the_cap() -> (
    None
):
    async with dispatcher() as h:
        for count, refused in ((MAX_INPUT_RESPONSES + 1, True), (MAX_INPUT_RESPONSES, False)):
            responses = {f"k{n}": {} for n in range(count)}
            await h.inbox.send(Request(count, "tools/call", modern({**CALL, "inputResponses": responses})))
            if refused:
                answer = await h.outbox.receive()
                assert isinstance(answer, ErrorResponse) and answer.error.code == -32602
                assert "MAX_INPUT_RESPONSES" in answer.error.message
                assert answer.error.data == {"field": "inputResponses", "limit": MAX_INPUT_RESPONSES}
                with pytest.raises(trio.WouldBlock):
                    h.backend.receive_nowait()  # it never reached the backend
            else:
                assert isinstance(await h.backend.receive(), Call)
