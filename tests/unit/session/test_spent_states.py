"""The gateway's wrapped requestStates are good for one retry, in the session they were handed out in: a
replay and another session's presentation are refused, and the memory of spent states is freed at their
expiry and at their session's end, and capped per owner."""

from __future__ import annotations

from typing import Any

import trio
from support import decoded
from test_dispatch import Harness, dispatcher
from test_modern import modern

from actors.protocol.envelopes import Ask, Call, Reply, ReplySlot
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY
from actors.protocol.messages import ErrorResponse, Message, Request, Response
from actors.session.dispatcher import Dispatcher
from actors.session.rounds import SpentStates

PARAMS = {"name": "echo", "arguments": {"text": "x"}}
ASKED = {"who": {"method": "elicitation/create", "params": {"message": "Name?"}}}


async def ask_in_another_session(h: Harness, params: dict[str, Any]) -> Message:
    """A request in a second session sharing the first one's settings (so its parked calls and key)."""
    assert h.actor is not None
    send, inbox = trio.open_memory_channel[Message](4)
    outbox, receive = trio.open_memory_channel[Message](4)
    other = Dispatcher(
        session="s2", inbox=inbox, outbox=outbox, catalog=h.catalog.watch, settings=h.actor.settings
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(other.run)
        await send.send(Request(9, "tools/call", params))
        answer = decoded(await receive.receive())
        nursery.cancel_scope.cancel()
    return answer


def refusal(message: Message) -> str:
    assert isinstance(message, ErrorResponse) and message.error.code == -32602, message
    return message.error.message


async def test_a_state_is_spent_by_its_retry_and_good_in_its_own_session_alone() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        spent = h.actor.settings.bridges.spent
        await h.inbox.send(Request(1, "tools/call", modern(PARAMS)))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        call.reply_to.fill(
            Reply(result={"resultType": "input_required", "inputRequests": ASKED, "requestState": "own"})
        )
        first = await h.outbox.receive()
        assert isinstance(first, Response)
        retry: dict[str, Any] = {**PARAMS, "inputResponses": {"who": {"action": "decline"}}}
        retry["requestState"] = first.result["requestState"]

        assert "not this session's" in refusal(await ask_in_another_session(h, modern(retry)))
        assert len(spent) == 0  # refused before it was spent

        await h.inbox.send(Request(2, "tools/call", modern(retry)))
        again = await h.backend.receive()
        assert isinstance(again, Call) and again.params is not None and again.params["requestState"] == "own"
        assert len(spent) == 1
        assert "used already" in refusal(await h.ask(3, "tools/call", modern(retry)))  # a replay
        assert h.backend.statistics().current_buffer_used == 0  # never reached the backend
    assert len(spent) == 0  # the session ended: its states are worth nothing, their memory is freed


async def test_a_parked_calls_state_is_good_in_its_own_session_alone() -> None:
    async with dispatcher() as h:
        asking = modern(PARAMS)
        asking["_meta"][CLIENT_CAPABILITIES_KEY] = {"roots": {}}
        await h.inbox.send(Request(1, "tools/call", asking))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.asks_to is not None
        call.asks_to.send_nowait(Ask(1, "one", "roots/list", None, ReplySlot(), "r1"))
        first = await h.outbox.receive()
        assert isinstance(first, Response) and first.result["resultType"] == "input_required"
        retry = {
            **asking,
            "requestState": first.result["requestState"],
            "inputResponses": {"r1": {"roots": []}},
        }
        assert "not this session's" in refusal(await ask_in_another_session(h, retry))
        await h.inbox.send(Request(2, "tools/call", retry))  # in its own session: the parked call goes on
        call.reply_to.fill(Reply(result={"content": []}))
        done = await h.outbox.receive()
        assert isinstance(done, Response) and done.result["resultType"] == "complete"


def test_spent_states_leave_at_expiry_and_are_capped_per_owner() -> None:
    spent = SpentStates(total=10, per_owner=2)
    assert spent.spend("a", "session:1", expiry=10.0, now=0.0) is None
    assert spent.spend("a", "session:1", expiry=10.0, now=1.0) == "used already"
    assert spent.spend("b", "session:1", expiry=20.0, now=1.0) is None
    assert spent.spend("c", "session:1", expiry=20.0, now=2.0) is not None  # its cap: refused, not forgotten
    assert spent.spend("x", "session:2", expiry=20.0, now=2.0) is None  # another owner is not held up
    assert spent.spend("c", "session:1", expiry=30.0, now=10.0) is None  # "a" expired: room again
    assert len(spent) == 3
    spent.forget_owner("session:1")
    assert len(spent) == 1
    assert spent.spend("y", "session:2", expiry=40.0, now=25.0) is None and len(spent) == 1  # "x" expired
    spent.sweep(now=40.0)
    assert len(spent) == 0
