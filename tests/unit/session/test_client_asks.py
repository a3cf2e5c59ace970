"""Who a backend's request for a client goes to, and what a session does with it: unit tests with memory
channels (the integration tests with real SDK clients are in test_client_requests.py)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors.backends.connection import BackendLink
from actors.catalog.clients import ClientDirectory
from actors.protocol.envelopes import Ask, Call, ReplySlot, ToClient, Withdraw
from actors.protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED
from actors.protocol.messages import ErrorResponse, Message, Notification, Request, Response, RpcError
from actors.session.client_asks import ClientAsks, refusal


def session_channel() -> tuple[trio.MemorySendChannel[ToClient], trio.MemoryReceiveChannel[ToClient]]:
    return trio.open_memory_channel[ToClient](4)


def link(clients: ClientDirectory) -> BackendLink:
    return BackendLink(
        name="alpha",
        transport=None,
        on_notification=lambda _: None,  # type: ignore[arg-type]
        cancel_scope=trio.CancelScope(),
        clients=clients,
    )


def call_from(call_id: int, asks_to: trio.MemorySendChannel[ToClient]) -> Call:
    return Call(call_id, "tools/call", {}, "s", ReplySlot(), asks_to=asks_to)


async def test_the_addressee_is_the_session_calling_then_the_only_one_connected_never_a_guess() -> None:
    clients = ClientDirectory()
    backend = link(clients)
    (a, _a_inbox), (b, _b_inbox) = session_channel(), session_channel()
    target, why = backend.client_requests._addressee("sampling/createMessage")
    assert target is None and why == "no client session is connected"
    clients.join("a", a)
    assert backend.client_requests._addressee("sampling/createMessage") == (a, "")  # the only session
    clients.join("b", b)
    target, why = backend.client_requests._addressee("sampling/createMessage")
    assert target is None and "2 client sessions are connected" in why
    backend.inflight[1] = call_from(1, b)
    assert backend.client_requests._addressee("sampling/createMessage") == (b, "")  # the one calling
    backend.inflight[2] = call_from(2, b)
    assert backend.client_requests._addressee("elicitation/create") == (b, "")  # two calls, one session
    backend.inflight[3] = call_from(3, a)
    target, why = backend.client_requests._addressee("sampling/createMessage")
    assert target is None and "ambiguous" in why
    backend.inflight.clear()
    # roots/list goes only to a session that is alone: the backend's roots are every session's.
    backend.inflight[1] = call_from(1, b)
    target, why = backend.client_requests._addressee("roots/list")
    assert target is None and "2 client sessions are connected" in why  # not even the one calling
    clients.leave("b")
    assert backend.client_requests._addressee("roots/list") == (
        a,
        "",
    )  # alone now, though b's call is still in flight
    clients.leave("a")
    target, why = backend.client_requests._addressee("roots/list")
    assert target is None and why == "no client session is connected"


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


async def test_elicitation_complete_follows_its_session_and_a_dying_backend_withdraws_its_asks() -> None:
    clients = ClientDirectory()
    backend = link(clients)
    (a, a_inbox), (b, b_inbox) = session_channel(), session_channel()
    clients.join("a", a)
    async with trio.open_nursery() as nursery:
        # URL mode through elicitation/create: the only session is asked, and remembered for the notice.
        params = {"mode": "url", "url": "https://example.com", "message": "m", "elicitationId": "e1"}
        backend._dispatch(Request(7, "elicitation/create", params), nursery)
        ask = a_inbox.receive_nowait()
        assert isinstance(ask, Ask) and ask.method == "elicitation/create" and ask.params == params
        # URL mode through a tool's -32042 error: the session whose call it was gets the notice.
        backend.inflight[5] = call_from(5, b)
        data = {"elicitations": [{"mode": "url", "elicitationId": "e2", "url": "https://x", "message": "m"}]}
        backend._dispatch(ErrorResponse(5, RpcError(URL_ELICITATION_REQUIRED, "open it", data)), nursery)
        for elicitation, inbox in (("e2", b_inbox), ("e1", a_inbox)):
            done = Notification("notifications/elicitation/complete", {"elicitationId": elicitation})
            backend._dispatch(done, nursery)
            assert inbox.receive_nowait() == done
        backend._dispatch(
            Notification("notifications/elicitation/complete", {"elicitationId": "e1"}), nursery
        )
        with pytest.raises(trio.WouldBlock):
            a_inbox.receive_nowait()  # delivered once, then forgotten
        # The backend dies with its request to `a` still open: `a` is told to withdraw it.
        backend.fail_all("it crashed")
        withdraw = a_inbox.receive_nowait()
        assert isinstance(withdraw, Withdraw) and withdraw.ask_id == ask.ask_id
        assert "backend 'alpha' is unavailable: it crashed" in withdraw.reason
        nursery.cancel_scope.cancel()
