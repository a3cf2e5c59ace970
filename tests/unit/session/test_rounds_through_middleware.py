"""Which requests are rounds to the middleware: a modern client's retry of a modern backend's round is the
call's next round (same call id, next number); a retry of a call parked on a legacy backend's asks only
continues that call (the backend acts once), so the middleware sees it once."""

from __future__ import annotations

from typing import Any

import attrs
from test_dispatch import dispatcher
from test_modern import modern

from actors.middleware import CallOutcome, Middleware, ToolCall
from actors.protocol.envelopes import Ask, Call, Reply, ReplySlot
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY
from actors.protocol.messages import Request, Response, RpcError

PARAMS = {"name": "echo", "arguments": {"text": "x"}}


@attrs.define
class Rounds(Middleware):
    seen: list[tuple[str, int, str]] = attrs.field(factory=list)  # (call id, round, outcome)

    async def before_call(self, call: ToolCall) -> RpcError | None:
        return None

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        self.seen.append((call.call_id, call.round, outcome.status))
        return outcome


async def test_a_modern_backends_rounds_are_one_calls_rounds() -> None:
    rounds = Rounds()
    async with dispatcher(middleware=(rounds,)) as h:
        await h.inbox.send(Request(1, "tools/call", modern(PARAMS)))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        asked = {"who": {"method": "elicitation/create", "params": {"message": "?"}}}
        round_one = {"resultType": "input_required", "inputRequests": asked, "requestState": "s"}
        call.reply_to.fill(Reply(result=round_one))
        first = await h.outbox.receive()
        assert isinstance(first, Response)
        retry: dict[str, Any] = {**PARAMS, "inputResponses": {"who": {"action": "decline"}}}
        retry["requestState"] = first.result["requestState"]
        await h.inbox.send(Request(2, "tools/call", modern(retry)))
        again = await h.backend.receive()
        assert isinstance(again, Call)
        again.reply_to.fill(Reply(result={"content": []}))
        assert isinstance(await h.outbox.receive(), Response)
    assert [(number, status) for _, number, status in rounds.seen] == [(1, "input_required"), (2, "ok")]
    assert rounds.seen[0][0] == rounds.seen[1][0] != ""  # one call id


async def test_a_retry_of_a_parked_call_is_not_a_new_round() -> None:
    rounds = Rounds()
    async with dispatcher(middleware=(rounds,)) as h:
        asking = modern(PARAMS)
        asking["_meta"][CLIENT_CAPABILITIES_KEY] = {"roots": {}}
        await h.inbox.send(Request(1, "tools/call", asking))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.asks_to is not None
        call.asks_to.send_nowait(Ask(1, "one", "roots/list", None, ReplySlot(), "r1"))
        first = await h.outbox.receive()
        assert isinstance(first, Response) and first.result["resultType"] == "input_required"
        retry = {**asking, "requestState": first.result["requestState"]}
        retry["inputResponses"] = {"r1": {"roots": []}}
        await h.inbox.send(Request(2, "tools/call", retry))
        call.reply_to.fill(Reply(result={"content": []}))
        done = await h.outbox.receive()
        assert isinstance(done, Response) and done.result["resultType"] == "complete"
    assert [(number, status) for _, number, status in rounds.seen] == [(1, "input_required")]
