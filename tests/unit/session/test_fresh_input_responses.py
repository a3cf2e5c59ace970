"""A modern client's call of its own (no requestState) that carries inputResponses: a modern backend gets
them (SEP-2322: a server may take answers given ahead and ignore keys it did not ask for); a legacy
backend's request has nowhere to put them."""

from __future__ import annotations

import orjson
from test_dispatch import dispatcher
from test_modern import modern

from actors.backends.connection import request_frame
from actors.protocol.envelopes import Call, ReplySlot
from actors.protocol.eras import ModernEnvelope
from actors.protocol.messages import Request


async def test_a_fresh_calls_input_responses_ride_on_its_call() -> None:
    given = {"user_name": {"action": "accept", "content": {"name": "Ada"}}, "extra": {"x": 1}}
    async with dispatcher() as h:
        await h.inbox.send(Request(1, "tools/call", modern({"name": "echo", "inputResponses": given})))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        assert call.input_responses == given and "inputResponses" not in (call.params or {})


def test_a_modern_link_passes_them_and_a_legacy_link_does_not() -> None:
    given = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    call = Call(1, "tools/call", {"name": "t"}, "s", ReplySlot(), input_responses=given)
    envelope = ModernEnvelope("2026-07-28", {})
    assert orjson.loads(request_frame(call, envelope))["params"]["inputResponses"] == given
    assert "inputResponses" not in orjson.loads(request_frame(call))["params"]
    retry = Call(
        2, "tools/call", {"name": "t", "inputResponses": {"k": {}}}, "s", ReplySlot(), input_responses=given
    )
    assert orjson.loads(request_frame(retry, envelope))["params"]["inputResponses"] == {
        "k": {}
    }  # a retry's own
