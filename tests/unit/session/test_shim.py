"""A modern backend's input_required lived out with a legacy client (session/shim.py), on memory channels:
the rounds as real requests, the retry with the answers and the exact state, and the failures."""

from __future__ import annotations

from typing import Any

from test_dispatch import dispatcher

from actors.protocol.envelopes import Call, Reply
from actors.protocol.messages import Request, Response

ASKED = {"who": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {}}}}


def input_required(state: str = "s-1", requests: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "resultType": "input_required",
        "inputRequests": ASKED if requests is None else requests,
        "requestState": state,
    }


async def test_a_round_goes_to_the_legacy_client_as_requests_and_back_to_the_backend() -> None:
    async with dispatcher() as h:
        await h.ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}})
        await h.inbox.send(Request(1, "tools/call", {"name": "echo", "arguments": {"x": 1}}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        call.reply_to.fill(Reply(result=input_required()))
        asked = await h.outbox.receive()
        assert isinstance(asked, Request) and asked.method == "elicitation/create"
        await h.inbox.send(Response(asked.id, {"action": "accept", "content": {"name": "Ada"}}))
        retry = await h.backend.receive()
        assert isinstance(retry, Call) and retry.params is not None
        assert retry.params["inputResponses"] == {"who": {"action": "accept", "content": {"name": "Ada"}}}
        assert (retry.params["requestState"], retry.params["arguments"]) == ("s-1", {"x": 1})
        retry.reply_to.fill(Reply(result={"content": [{"type": "text", "text": "Hello, Ada"}]}))
        done = await h.outbox.receive()
        assert isinstance(done, Response) and done.id == 1
        assert done.result["content"][0]["text"] == "Hello, Ada"


async def test_a_round_the_client_cannot_take_fails_the_tool_call_with_a_reason() -> None:
    async with dispatcher() as h:
        await h.ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        await h.inbox.send(Request(1, "tools/call", {"name": "echo"}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        call.reply_to.fill(Reply(result=input_required()))
        done = await h.outbox.receive()  # nothing was asked of the client: the call fails at once
        assert isinstance(done, Response) and done.result["isError"] is True
        assert "did not declare elicitation" in done.result["content"][0]["text"]


async def test_a_malformed_round_fails_the_call_before_asking_anything() -> None:
    async with dispatcher() as h:
        await h.ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}})
        await h.inbox.send(Request(1, "tools/call", {"name": "echo"}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        call.reply_to.fill(Reply(result=input_required(requests={"x": {"method": "tasks/get"}})))
        done = await h.outbox.receive()
        assert isinstance(done, Response) and done.result["isError"] is True
        assert "is not a sampling, elicitation or roots request" in done.result["content"][0]["text"]


async def test_a_round_asking_for_too_much_fails_before_asking_anything() -> None:
    async with dispatcher() as h:
        await h.ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}})
        await h.inbox.send(Request(1, "tools/call", {"name": "echo"}))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        flood = {f"k{n}": ASKED["who"] for n in range(1000)}
        call.reply_to.fill(Reply(result=input_required(requests=flood)))
        done = await h.outbox.receive()  # no request reached the client first
        assert isinstance(done, Response) and done.result["isError"] is True
        assert "1000 inputs in one round" in done.result["content"][0]["text"]
