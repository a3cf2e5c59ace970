"""The gateway's wrapped requestStates are good for one retry, in the session they were handed out in: a
replay and another session's presentation are refused, and the memory of spent states is freed at their
expiry and at their session's end, and capped per owner."""

from __future__ import annotations

import random
from typing import Any

import attrs
import trio
import trio.testing
from support import decoded
from test_dispatch import Harness, dispatcher
from test_modern import modern

from actors.policy import Caller
from actors.protocol.envelopes import Ask, Call, Reply, ReplySlot
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY
from actors.protocol.messages import ErrorResponse, Message, Request, Response
from actors.session.dispatcher import Dispatcher
from actors.session.rounds import FORGOTTEN, OVER_CLIENT_CAP, SpentStates
from actors.session.settings import SessionSettings

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


def test_spent_states_leave_at_expiry_and_are_capped_per_client() -> None:
    spent = SpentStates(total=10, per_client=2)
    assert spent.spend("a", client="A", session="1", expiry=10.0, now=0.0) is None
    assert spent.spend("a", client="A", session="1", expiry=10.0, now=1.0) == "used already"
    assert spent.spend("b", client="A", session="2", expiry=20.0, now=1.0) is None  # its other session
    assert spent.spend("c", client="A", session="3", expiry=20.0, now=2.0) == OVER_CLIENT_CAP  # not forgotten
    assert spent.spend("x", client="B", session="4", expiry=20.0, now=2.0) is None  # another is not held up
    assert spent.spend("c", client="A", session="3", expiry=30.0, now=10.0) is None  # "a" expired: room again
    assert len(spent) == 3
    spent.forget_session("2")
    assert len(spent) == 2 and spent.held_by("A") == 1
    assert spent.spend("y", client="B", session="4", expiry=40.0, now=25.0) is None and len(spent) == 2
    spent.sweep(now=40.0)
    assert len(spent) == 0 and spent.held_by("A") == spent.held_by("B") == 0


def test_a_full_table_makes_room_from_the_fullest_client_and_its_dropped_states_stay_spent() -> None:
    spent = SpentStates(total=6, per_client=4)
    for n in range(4):
        assert spent.spend(f"a{n}", client="A", session=None, expiry=100.0 + n, now=0.0) is None
    for n in range(2):
        assert spent.spend(f"b{n}", client="B", session=None, expiry=100.0 + n, now=0.0) is None
    assert len(spent) == 6  # full
    assert spent.spend("c0", client="C", session=None, expiry=110.0, now=1.0) is None  # served, not refused
    assert spent.spend("c1", client="C", session=None, expiry=110.0, now=1.0) is None
    assert (spent.held_by("A"), spent.held_by("B"), spent.held_by("C")) == (2, 2, 2)  # A gave its two oldest
    assert spent.spend("a0", client="A", session=None, expiry=100.0, now=2.0) == FORGOTTEN  # no replay
    assert spent.spend("a9", client="A", session=None, expiry=101.0, now=2.0) == FORGOTTEN  # nor older ones
    assert spent.spend("a5", client="A", session=None, expiry=120.0, now=2.0) is None  # a newer one: served
    spent.sweep(now=200.0)
    spent.spend("later", client="D", session=None, expiry=400.0, now=200.0)
    assert spent.spend("a0", client="A", session=None, expiry=300.0, now=200.0) is None  # sealed later: fresh


def test_whatever_one_client_does_the_others_keep_their_share() -> None:
    """Many clients at random, one of them far busier: no spend is ever refused for the table being full,
    only a client past its own cap, and the table never holds more than its total."""
    spent, rng = SpentStates(total=64, per_client=8), random.Random(34)
    for n in range(5000):
        client = "greedy" if rng.random() < 0.7 else f"c{rng.randrange(40)}"
        refused = spent.spend(f"s{n}", client=client, session=None, expiry=n + 300.0, now=float(n))
        assert refused is None or (refused == OVER_CLIENT_CAP and spent.held_by(client) == 8)
        assert len(spent) <= 64


async def test_one_anonymous_stateless_client_at_its_cap_does_not_hold_up_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without a token every stateless request was the one owner "anonymous": one client's retries held
    every other client's refused. Clients are told apart as sessions are counted: by address."""
    async with dispatcher() as h:
        assert h.actor is not None
        settings = attrs.evolve(h.actor.settings, quiet=True)  # a stateless HTTP POST's session
        settings.bridges.spent = SpentStates(total=64, per_client=1)

        async def retried_from(address: str, n: int) -> Message:
            caller = Caller(address=address, listener="http")
            answer = await in_session(h, settings, caller, Request(n, "tools/call", modern(PARAMS)), n)
            assert isinstance(answer, Response)
            retry = {**PARAMS, "inputResponses": {"who": {"action": "decline"}}}
            retry["requestState"] = answer.result["requestState"]
            return await in_session(h, settings, caller, Request(n + 1, "tools/call", modern(retry)), n + 1)

        assert isinstance(await retried_from("10.0.0.1", 10), Response)
        assert OVER_CLIENT_CAP in refusal(await retried_from("10.0.0.1", 20))  # its one spent state
        assert isinstance(await retried_from("10.0.0.2", 30), Response)  # another client: served
        assert settings.bridges.spent.held_by(Caller(address="10.0.0.2", listener="http").key) == 1


async def in_session(
    h: Harness, settings: SessionSettings, caller: Caller, request: Request, n: int
) -> Message:
    """`request` in a session of its own (a stateless one: `settings.quiet`), answered by the backend as a
    modern backend asking for input (the first round) or with a result (a retry)."""
    send, inbox = trio.open_memory_channel[Message](4)
    outbox, receive = trio.open_memory_channel[Message](4)
    session = Dispatcher(
        session=f"p{n}", inbox=inbox, outbox=outbox, catalog=h.catalog.watch, settings=settings, caller=caller
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        await send.send(request)
        with trio.move_on_after(1):
            call = await h.backend.receive()
            assert isinstance(call, Call)
            retry = call.params is not None and "requestState" in call.params
            result = {"content": []} if retry else {"resultType": "input_required", "inputRequests": ASKED}
            call.reply_to.fill(Reply(result={**result, "requestState": "own"} if not retry else result))
        answer = decoded(await receive.receive())
        nursery.cancel_scope.cancel()
    return answer
