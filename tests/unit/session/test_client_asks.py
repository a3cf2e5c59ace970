"""What a session does with a backend's request for its client (session/client_asks.py): unit tests with
memory channels. Who the request goes to is tested in tests/unit/backends/test_client_requests.py, and with
real SDK clients in tests/integration/test_client_requests.py."""

from __future__ import annotations

from typing import Any

import pytest

from actors.protocol.envelopes import Ask, ReplySlot, Withdraw
from actors.protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from actors.protocol.messages import Message, Notification, Request, Response
from actors.session.client_asks import ClientAsks, refusal


@pytest.mark.parametrize(
    ("method", "params", "capabilities", "code"),
    [
        ("sampling/createMessage", {}, {"sampling": {}}, None),
        ("sampling/createMessage", {}, {"roots": {}}, METHOD_NOT_FOUND),
        ("sampling/createMessage", {"tools": [{"name": "t"}]}, {"sampling": {}}, METHOD_NOT_FOUND),
        ("sampling/createMessage", {"tools": [{"name": "t"}]}, {"sampling": {"tools": {}}}, None),
        ("elicitation/create", {"mode": "form"}, {"elicitation": {}}, None),  # 2025-06-18: form only
        ("elicitation/create", {}, {"elicitation": {"form": {}}}, None),
        ("elicitation/create", {"mode": "url"}, {"elicitation": {}}, INVALID_PARAMS),
        ("elicitation/create", {"mode": "url"}, {"elicitation": {"form": {}}}, INVALID_PARAMS),
        ("elicitation/create", {"mode": "url"}, {"elicitation": {"url": {}}}, None),
        ("elicitation/create", {"mode": "form"}, {"elicitation": {"url": {}}}, INVALID_PARAMS),
        ("elicitation/create", {}, {}, METHOD_NOT_FOUND),
        ("roots/list", {}, {"roots": {"listChanged": True}}, None),
        ("roots/list", {}, {"sampling": {}}, METHOD_NOT_FOUND),
    ],
)
def test_a_request_is_refused_when_the_client_did_not_declare_what_it_needs(
    method: str, params: dict[str, Any], capabilities: dict[str, Any], code: int | None
) -> None:
    refused = refusal(method, params, capabilities)
    assert (refused.code if refused else None) == code


async def test_the_session_answers_every_ask_once_even_when_it_ends_first() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asks = ClientAsks(send, {"sampling": {}})
    replies = []
    for ask_id in (7, 8, 9):
        slot = ReplySlot()
        replies.append(slot)
        await asks.take(Ask(ask_id, "alpha", "sampling/createMessage", {}, slot), operating=True)
    assert [m.id for m in sent] == [7, 8, 9] and all(isinstance(m, Request) for m in sent)  # type: ignore[union-attr]
    assert asks.settle(Response(7, {"role": "assistant"}))
    assert (await replies[0].wait()).result == {"role": "assistant"}
    assert not asks.settle(Response(7, {}))  # answered already: not ours any more
    await asks.take(Withdraw(8, "the server gave up"), operating=True)
    assert sent[-1] == Notification(
        "notifications/cancelled", {"requestId": 8, "reason": "the server gave up"}
    )
    asks.fail_all("the client session ended before answering")
    reply = await replies[2].wait()
    assert reply.error is not None and "ended" in reply.error.message
    slot = ReplySlot()
    await asks.take(Ask(10, "alpha", "sampling/createMessage", {}, slot), operating=False)
    reply = await slot.wait()
    assert reply.error is not None and "initializing" in reply.error.message
