"""The era bridge's parked calls, alone: gathering asks, states good for one round, answers parked between
rounds, malformed answers, missing capabilities, and the retry that never comes (MockClock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from actors.catalog import BackendState, BackendStatus
from actors.protocol.envelopes import Ask, BackendCommand, Cancel, Reply, ReplySlot, Withdraw
from actors.protocol.messages import RpcError
from actors.session.bridge import MAX_PENDING, BridgedCall
from actors.session.parked import GATHER_S, MAX_PARKED_PER_SESSION, Bridges

PARAMS = {"name": "tool", "arguments": {"x": 1}}
FORM = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}


def ask(request_id: str, method: str = "elicitation/create", params: dict[str, Any] | None = None) -> Ask:
    return Ask(
        hash(request_id) & 0xFFFF, "b", method, FORM if params is None else params, ReplySlot(), request_id
    )


BACKEND: dict[str, BackendStatus] = {}
OPEN: dict[str, Any] = {
    "method": "tools/call", "params": PARAMS, "principal": None, "capabilities": {}, "responses": {},
    "target": ReplySlot(),
}  # fmt: skip


@asynccontextmanager
async def bridges(
    **settings: Any,
) -> AsyncIterator[tuple[Bridges, trio.MemoryReceiveChannel[BackendCommand]]]:
    calls, commands = trio.open_memory_channel[BackendCommand](8)
    BACKEND["b"] = BackendStatus(name="b", state=BackendState.READY, request_timeout_s=30.0, calls=calls)
    async with trio.open_nursery() as nursery:
        yield Bridges(nursery=nursery, **settings), commands
        nursery.cancel_scope.cancel()


def opened(table: Bridges, target: ReplySlot, capabilities: dict[str, Any] | None = None) -> BridgedCall:
    call = table.open(
        method="tools/call",
        params=PARAMS,
        principal=None,
        capabilities={"elicitation": {}, "sampling": {}, "roots": {}}
        if capabilities is None
        else capabilities,
        responses={},
        target=target,
    )
    assert isinstance(call, BridgedCall)
    call.backend, call.call_id = BACKEND["b"], 7
    return call


def resume(
    table: Bridges, state: object, responses: dict[str, Any], target: ReplySlot, **changes: Any
) -> Any:
    return table.resume(
        method="tools/call",
        params={**PARAMS, **changes},
        state=state,
        principal=None,
        capabilities={"elicitation": {}},
        responses=responses,
        target=target,
    )


async def input_required(slot: ReplySlot) -> dict[str, Any]:
    reply = await slot.wait()
    assert reply.error is None and reply.result["resultType"] == "input_required", reply
    return reply.result  # type: ignore[no-any-return]


async def test_asks_sent_together_go_out_together_and_a_retry_answers_them(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        call = opened(table, first)
        asks = [
            ask("user_name"),
            ask("greeting", "sampling/createMessage", {"messages": []}),
            ask("roots", "roots/list", {}),
        ]
        for item in asks:
            call.send_nowait(item)
        result = await input_required(first)
        assert sorted(result["inputRequests"]) == ["greeting", "roots", "user_name"]
        assert result["inputRequests"]["roots"] == {"method": "roots/list"}

        second = ReplySlot()
        answers = {"user_name": {"action": "accept", "content": {"name": "A"}}, "greeting": {"content": {}}}
        assert resume(table, result["requestState"], answers, second) is call
        assert [item.reply_to.filled for item in asks] == [True, True, False]
        again = await input_required(second)  # the one it did not answer is asked again, at once
        assert list(again["inputRequests"]) == ["roots"] and again["requestState"] != result["requestState"]

        third = ReplySlot()
        assert resume(table, again["requestState"], {"roots": {"roots": []}}, third) is call
        call.fill(Reply(result={"content": []}))  # the backend, done
        assert (await third.wait()).result == {"content": []}
        assert table.calls == {}


async def test_a_state_is_good_for_its_call_and_round_only(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        call = opened(table, first)
        call.send_nowait(ask("k"))
        state = (await input_required(first))["requestState"]
        assert resume(table, state, {}, ReplySlot(), arguments={"x": 2}).code == -32602  # other arguments
        assert resume(table, state, {}, ReplySlot(), name="other").code == -32602
        assert resume(table, state + "x", {}, ReplySlot()).code == -32602
        assert resume(table, 5, {}, ReplySlot()).code == -32602
        assert resume(table, state, {}, ReplySlot()) is call  # a state-only round: asked again
        assert resume(table, state, {}, ReplySlot()).code == -32602  # used already


async def test_an_answer_that_comes_between_rounds_waits_for_the_retry(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        call = opened(table, first)
        call.send_nowait(item := ask("k"))
        state = (await input_required(first))["requestState"]
        call.send_nowait(Withdraw(item.ask_id, "changed its mind"))  # the backend withdraws its ask...
        assert item.reply_to.filled
        call.fill(Reply(result={"content": [{"type": "text", "text": "done anyway"}]}))  # ...and answers
        retry = ReplySlot()
        assert resume(table, state, {}, retry) is call
        assert (await retry.wait()).result == {"content": [{"type": "text", "text": "done anyway"}]}


async def test_a_malformed_answer_fails_the_call_and_cancels_it_at_the_backend(autojump_clock: Any) -> None:
    async with bridges() as (table, commands):
        first = ReplySlot()
        call = opened(table, first)
        call.send_nowait(item := ask("k"))
        state = (await input_required(first))["requestState"]
        error = resume(table, state, {"k": 12345}, ReplySlot())
        assert error.code == -32602 and error.data == {"field": "inputResponses.k"}
        assert (await item.reply_to.wait()).error is not None
        assert await commands.receive() == Cancel(7, "the client's answer was malformed")


async def test_an_ask_the_client_cannot_take_fails_its_call_with_32021(autojump_clock: Any) -> None:
    async with bridges() as (table, commands):
        first = ReplySlot()
        call = opened(table, first, capabilities={"elicitation": {}})
        call.send_nowait(item := ask("s", "sampling/createMessage", {"messages": []}))
        reply = await first.wait()
        assert reply.error is not None and reply.error.code == -32021
        assert reply.error.data == {"requiredCapabilities": {"sampling": {}}}
        assert (await item.reply_to.wait()).error.code == -32601  # type: ignore[union-attr]
        assert isinstance(await commands.receive(), Cancel)


async def test_a_retry_that_never_comes_is_given_up_after_the_ttl(autojump_clock: Any) -> None:
    async with bridges(ttl_s=300.0) as (table, commands):
        first = ReplySlot()
        call = opened(table, first)
        call.send_nowait(item := ask("k"))
        state = (await input_required(first))["requestState"]
        started = trio.current_time()
        assert await commands.receive() == Cancel(7, "the client did not come back")
        assert trio.current_time() - started >= 300.0
        assert (await item.reply_to.wait()).error is not None and table.calls == {}
        assert resume(table, state, {}, ReplySlot()).code == -32602  # expired


async def test_a_modern_backends_state_too_large_to_carry_is_an_error_naming_it(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        call = opened(table, first)
        huge = {"resultType": "input_required", "inputRequests": {}, "requestState": "s" * 100_000}
        call.fill(Reply(result=huge))
        reply = await first.wait()
        assert reply.error is not None and reply.error.code == -32603
        assert reply.error.data == {"backend": "b"} and table.calls == {}


async def test_a_backend_flooding_one_call_with_asks_is_refused_past_the_cap(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        call = opened(table, ReplySlot())
        flood = [ask(f"k{n}") for n in range(MAX_PENDING + 3)]
        for item in flood:
            call.send_nowait(item)
        assert len(call.pending) == MAX_PENDING
        assert all(item.reply_to.filled for item in flood[MAX_PENDING:])  # refused at once
        assert not any(item.reply_to.filled for item in flood[:MAX_PENDING])


async def test_every_round_keeps_one_timer_and_an_ended_call_leaves_no_entry_and_no_task(
    mock_clock: trio.testing.MockClock,
) -> None:
    async def round_of(slot: ReplySlot) -> str:
        await trio.testing.wait_all_tasks_blocked()  # the gathering timer is asleep
        mock_clock.jump(GATHER_S)  # the asks gathered go out
        state: str = (await input_required(slot))["requestState"]
        await trio.testing.wait_all_tasks_blocked()
        return state

    async with bridges() as (table, _):
        assert table.nursery is not None
        nursery = table.nursery
        first = ReplySlot()
        call = opened(table, first)
        call.send_nowait(ask("one"))
        state = await round_of(first)
        assert len(nursery.child_tasks) == 1  # the round's expiry; the gathering timer has run and ended
        for n in range(3):  # rounds retried: each new round's timer replaces the one before
            retry = ReplySlot()
            assert resume(table, state, {"one" if n == 0 else f"r{n}": {"action": "accept"}}, retry) is call
            call.send_nowait(ask(f"r{n + 1}"))
            state = await round_of(retry)
            assert len(nursery.child_tasks) == 1
        call.close("the client cancelled its request")
        await trio.testing.wait_all_tasks_blocked()
        assert (table.calls, dict(table.opened_by), len(nursery.child_tasks)) == ({}, {}, 0)


async def test_one_session_cannot_take_every_parked_call(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        kept = [table.open(**OPEN, session="greedy") for _ in range(MAX_PARKED_PER_SESSION)]
        assert all(isinstance(call, BridgedCall) for call in kept)
        refused = table.open(**OPEN, session="greedy")  # past its share: refused, with the cap named
        assert isinstance(refused, RpcError) and refused.data["budget"] == "MAX_PARKED_PER_SESSION"
        assert isinstance(table.open(**OPEN, session="another"), BridgedCall)  # others are not starved
        for call in kept:
            assert isinstance(call, BridgedCall)
            call.close("done")
        assert isinstance(table.open(**OPEN, session="greedy"), BridgedCall)
        assert (table.opened_by["session:greedy"], table.opened_in["greedy"]) == (1, 1)
