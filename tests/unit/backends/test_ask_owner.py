"""Whose call a backend's request for a client belongs to (backends/ask_owner.py), as a decision table:
the stream it came on, its trace context, the only call that could have caused it; and, through a link, the
#25 case: a modern client's call parked between rounds stays its asks' owner."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors.backends.ask_owner import NOBODYS, owner_of
from actors.backends.client_requests import LINGER_S
from actors.backends.connection import BackendLink
from actors.backends.sse import MAX_ORIGINS, StreamOrigins
from actors.catalog.clients import ClientDirectory
from actors.protocol.envelopes import Ask, Call, Cancel, ReplySlot, ToClient
from actors.protocol.messages import Request, Response
from actors.protocol.trace_context import trace_id
from actors.session.parked import Bridges

TRACE_A = "0af7651916cd43dd8448eb211c80319c"
TRACE_B = "4bf92f3577b34da6a3ce929d0e0e4736"


def traced(trace: str) -> dict[str, Any]:
    return {"_meta": {"traceparent": f"00-{trace}-b7ad6b7169203331-01"}}


def mailbox() -> trio.MemorySendChannel[ToClient]:
    send, _ = trio.open_memory_channel[ToClient](4)
    return send


def call(
    call_id: int, asks_to: Any, method: str = "tools/call", params: dict[str, Any] | None = None
) -> Call:
    params = params or {}
    return Call(call_id, method, params, "s", ReplySlot(), asks_to=asks_to, trace=trace_id(params))


def test_the_stream_a_request_came_on_names_its_call_even_among_many() -> None:
    a, b = mailbox(), mailbox()
    inflight = {1: call(1, a), 2: call(2, b)}
    assert owner_of({}, inflight, streamed_on=2).call is inflight[2]
    assert owner_of({}, inflight, streamed_on=1).call is inflight[1]


def test_a_request_whose_call_has_ended_is_refused_never_given_to_another() -> None:
    inflight = {2: call(2, mailbox())}
    owner = owner_of({}, inflight, streamed_on=1)  # call 1 is gone; call 2 is the only one left
    assert owner.call is None and "has ended" in owner.why_not
    inflight[3] = Call(3, "tools/list", None, "gateway", ReplySlot())  # the gateway's own request
    owner = owner_of({}, inflight, streamed_on=3)
    assert owner.call is None and "not a client's call that can ask" in owner.why_not
    assert owner_of({}, inflight, streamed_on="not ours").why_not


def test_the_trace_id_names_the_call_it_continues() -> None:
    a, b = mailbox(), mailbox()
    inflight = {1: call(1, a, params=traced(TRACE_A)), 2: call(2, b, params=traced(TRACE_B))}
    assert owner_of(traced(TRACE_B), inflight).call is inflight[2]
    assert owner_of(traced(TRACE_A), inflight).call is inflight[1]
    # A trace nobody's call has (the server's own): no hint, and two clients' calls are ambiguous.
    owner = owner_of(traced("1" * 32), inflight)
    assert owner.call is None and "ambiguous" in owner.why_not
    # A trace of a call that has ended: refused, though one call alone is left that could have asked.
    del inflight[1]
    owner = owner_of(traced(TRACE_A), inflight, ended={TRACE_A})
    assert owner.call is None and "has ended" in owner.why_not
    assert owner_of(traced("1" * 32), inflight, ended={TRACE_A}).call is inflight[2]  # no hint: the only one


def test_without_a_hint_only_the_one_call_that_could_have_asked_owns_it() -> None:
    a, b = mailbox(), mailbox()
    assert owner_of({}, {}) == NOBODYS
    inflight = {1: call(1, a), 2: call(2, b, method="tools/list"), 3: call(3, b, method="ping")}
    assert owner_of({}, inflight).call is inflight[1]  # lists and pings do not ask
    inflight[4] = call(4, a, method="prompts/get")
    assert owner_of({}, inflight).call is not None  # two calls, one client
    inflight[5] = call(5, b, method="resources/read")
    owner = owner_of({}, inflight)
    assert owner.call is None and "calls of 2 clients" in owner.why_not


async def test_a_second_ask_of_a_parked_modern_call_never_reaches_another_client() -> None:
    """#25: a legacy backend asks twice during modern client A's call; between the asks A's call is parked
    (its client is answering the first round) while legacy client B has a call in flight on the backend.
    The second ask is A's: refused as ambiguous without a hint, A's with one, and never B's."""
    clients = ClientDirectory()
    b_send, b_inbox = trio.open_memory_channel[ToClient](4)
    clients.join("b", b_send)
    link = link_to(clients)
    table = Bridges()  # no nursery: gathering happens at once
    first_round = ReplySlot()
    bridged = table.open(
        method="tools/call",
        params={"name": "ask", "arguments": {}},
        principal=None,
        capabilities={"sampling": {}},
        responses={},
        target=first_round,
    )
    assert bridged is not None
    a_params = traced(TRACE_A)
    link.inflight[1] = Call(
        1, "tools/call", a_params, "a", bridged, asks_to=bridged, own_asks=True, trace=TRACE_A
    )
    link.inflight[2] = call(2, b_send, params=traced(TRACE_B))
    sample = {"messages": [], "maxTokens": 5}
    async with trio.open_nursery() as nursery:
        link.client_requests.take(Request("s1", "sampling/createMessage", {**sample, **a_params}), nursery)
        assert first_round.filled  # A's client got its round: A's call is parked now
        assert bridged.target is None and not bridged.closed
        # The second ask without a hint: two clients' calls could have caused it, so it is refused.
        link.client_requests.take(Request("s2", "sampling/createMessage", sample), nursery)
        await trio.testing.wait_all_tasks_blocked()
        refused = link.transport.sent[-1]  # type: ignore[attr-defined]
        assert b'"id":"s2"' in refused and b"ambiguous" in refused
        # With A's trace it is A's: parked, it waits for A's retry; B is never asked.
        link.client_requests.take(Request("s3", "sampling/createMessage", {**sample, **a_params}), nursery)
        assert [ask.request_id for ask in bridged.pending.values()] == ["s1", "s3"]
        nursery.cancel_scope.cancel()
    with pytest.raises(trio.WouldBlock):
        b_inbox.receive_nowait()  # B's client was asked nothing


def link_to(clients: ClientDirectory) -> BackendLink:
    """A backend link whose frames to the backend are kept (`link.transport.sent`)."""
    return BackendLink(
        name="alpha",
        transport=_Frames(),  # type: ignore[arg-type]
        on_notification=lambda _: None,
        cancel_scope=trio.CancelScope(),
        clients=clients,
    )


class _Frames:
    """A transport that keeps what the link writes."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send_many(self, frames: list[bytes]) -> None:
        self.sent.extend(frames)


async def test_a_call_that_ends_leaves_its_trace_behind_so_a_late_ask_is_refused() -> None:
    """The backend asks for a call the gateway has cancelled (it did not stop in time): the ask names the
    ended call's trace and is refused, though another client's call is the only one in flight."""
    clients = ClientDirectory()
    a_send, a_inbox = trio.open_memory_channel[ToClient](4)
    b_send, b_inbox = trio.open_memory_channel[ToClient](4)
    clients.join("a", a_send)
    clients.join("b", b_send)
    link = link_to(clients)
    link.track(call(1, a_send, params=traced(TRACE_A)))
    link.track(call(2, b_send, params=traced(TRACE_B)))
    assert link.cancel_frame(Cancel(1, "cancelled by the client")) is not None  # A's call is gone
    sample = {"messages": [], "maxTokens": 5, **traced(TRACE_A)}
    async with trio.open_nursery() as nursery:
        link.client_requests.take(Request("late", "sampling/createMessage", sample), nursery)
        await trio.testing.wait_all_tasks_blocked()
    assert b'"id":"late"' in link.transport.sent[-1] and b"has ended" in link.transport.sent[-1]  # type: ignore[attr-defined]
    for inbox in (a_inbox, b_inbox):
        with pytest.raises(trio.WouldBlock):
            inbox.receive_nowait()


def test_the_stream_a_request_came_on_is_told_once_and_what_is_kept_is_bounded() -> None:
    origins = StreamOrigins()
    origins.note({"jsonrpc": "2.0", "id": 5, "method": "sampling/createMessage"}, 41)
    origins.note({"jsonrpc": "2.0", "id": "s", "method": "ping"}, 42)
    origins.note({"jsonrpc": "2.0", "method": "notifications/progress"}, 41)  # not a request
    origins.note({"jsonrpc": "2.0", "id": 6, "result": {}}, 41)  # a response
    for odd_id in ([1], {"a": 1}, True, None, 1.5):
        origins.note({"jsonrpc": "2.0", "id": odd_id, "method": "x"}, 41)
    origins.note(None, 41)
    assert len(origins) == 2
    assert origins.pop(5) == 41 and origins.pop(5) is None  # told once, then freed
    assert origins.pop([1]) is None and origins.pop(True) is None
    for n in range(MAX_ORIGINS + 10):
        origins.note({"id": n, "method": "x"}, 0)
    assert len(origins) == MAX_ORIGINS and origins.pop(0) is None  # the oldest went first


def test_a_call_given_up_lately_still_owns_what_nothing_names() -> None:
    a, b = mailbox(), mailbox()
    given_up = [call(1, a)]  # cancelled by its client; its backend may still be running it
    inflight = {2: call(2, b)}
    owner = owner_of({}, inflight, lingering=given_up)
    assert owner.call is None and "given up lately" in owner.why_not  # never B's by default
    assert owner_of({}, {}, lingering=given_up).why_not  # nor the only session's
    assert owner_of({}, {3: call(3, a)}, lingering=given_up).call is not None  # the same client's: fine
    traced_b = {2: call(2, b, params=traced(TRACE_B))}
    assert owner_of(traced(TRACE_B), traced_b, lingering=given_up).call is traced_b[2]  # named: B's
    assert owner_of({}, inflight, streamed_on=2, lingering=given_up).call is inflight[2]


async def test_a_cancelled_call_lingers_until_its_backend_answers_it_or_linger_s_passes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clients = ClientDirectory()
    a_send, _ = trio.open_memory_channel[ToClient](4)
    b_send, b_inbox = trio.open_memory_channel[ToClient](4)
    clients.join("a", a_send)
    clients.join("b", b_send)
    link = link_to(clients)
    sample = {"messages": [], "maxTokens": 5}
    async with trio.open_nursery() as nursery:
        for answered_late in (True, False):
            link.track(call(1, a_send))
            link.track(call(2, b_send))
            assert link.cancel_frame(Cancel(1, "cancelled by the client")) is not None
            link.client_requests.take(
                Request(f"q1-{answered_late}", "sampling/createMessage", sample), nursery
            )
            await trio.testing.wait_all_tasks_blocked()
            assert b"given up lately" in link.transport.sent[-1]  # type: ignore[attr-defined]
            if answered_late:
                link._dispatch(Response(1, {"content": []}), nursery)  # the backend finished it after all
            else:
                await trio.sleep(LINGER_S)
            link.client_requests.take(
                Request(f"q2-{answered_late}", "sampling/createMessage", sample), nursery
            )
            assert isinstance(b_inbox.receive_nowait(), Ask)  # B's call is the only one that could ask now
            link.inflight.clear()
        nursery.cancel_scope.cancel()
