"""Who a backend's request for a client goes to, and what becomes of the requests it sent when it dies:
unit tests of backends/client_requests.py with memory channels (with real SDK clients:
tests/integration/test_client_requests.py; named apart from it, as pytest needs unique basenames)."""

from __future__ import annotations

import pytest
import trio

from actors.backends.connection import BackendLink
from actors.catalog.clients import ClientDirectory
from actors.protocol.envelopes import Ask, Call, ReplySlot, ToClient, Withdraw
from actors.protocol.errors import URL_ELICITATION_REQUIRED
from actors.protocol.messages import ErrorResponse, Notification, Request, RpcError

SAMPLE, ELICIT, ROOTS = (
    Request(9, m) for m in ("sampling/createMessage", "elicitation/create", "roots/list")
)


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
    target, why = backend.client_requests._addressee(SAMPLE)
    assert target is None and why == "no client session is connected"
    clients.join("a", a)
    assert backend.client_requests._addressee(SAMPLE) == (
        a,
        "",
    )  # the only session
    clients.join("b", b)
    target, why = backend.client_requests._addressee(SAMPLE)
    assert target is None and "2 client sessions are connected" in why
    backend.inflight[1] = call_from(1, b)
    assert backend.client_requests._addressee(SAMPLE) == (
        b,
        "",
    )  # the one calling
    backend.inflight[2] = call_from(2, b)
    assert backend.client_requests._addressee(ELICIT) == (
        b,
        "",
    )  # two calls, one session
    backend.inflight[3] = call_from(3, a)
    target, why = backend.client_requests._addressee(SAMPLE)
    assert target is None and "ambiguous" in why
    backend.inflight.clear()
    # roots/list goes only to a session that is alone: the backend's roots are every session's.
    backend.inflight[1] = call_from(1, b)
    target, why = backend.client_requests._addressee(ROOTS)
    assert target is None and "2 client sessions are connected" in why  # not even the one calling
    clients.leave("b")
    assert backend.client_requests._addressee(ROOTS) == (
        a,
        "",
    )  # alone now, though b's call is still in flight
    clients.leave("a")
    target, why = backend.client_requests._addressee(ROOTS)
    assert target is None and why == "no client session is connected"


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
