"""The backend connection's in-flight table: the one place a forwarded call waits, answered exactly once,
and swept when the backend does not answer within request_timeout_s (one timer for every call)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import orjson
import pytest
import trio
import trio.testing

from actors.backends.connection import BackendLink, request_frame
from actors.protocol.codec import encode
from actors.protocol.envelopes import Call, Cancel, ReplySlot
from actors.protocol.errors import REQUEST_TIMEOUT
from actors.protocol.messages import ErrorResponse, Request, Response, RpcError
from actors.runtime.redact import REDACTOR


@attrs.define
class RecordingTransport:
    """Frames the link writes, kept; nothing ever comes back."""

    sent: list[dict[str, object]] = attrs.field(factory=list)
    wrote: trio.Event = attrs.field(factory=trio.Event)

    async def receive(self) -> bytes | None:
        await trio.sleep_forever()

    async def send(self, frame: bytes) -> None:
        await self.send_many([frame])

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return False  # every frame through send_many

    async def send_many(self, frames: Sequence[bytes]) -> None:
        self.sent += [orjson.loads(frame) for frame in frames]
        self.wrote.set()

    async def aclose(self) -> None:
        pass


def link_over(transport: RecordingTransport, timeout_s: float = math.inf) -> BackendLink:
    return BackendLink(
        name="alpha",
        transport=transport,  # type: ignore[arg-type]
        on_notification=lambda _: None,
        cancel_scope=trio.CancelScope(),
        request_timeout_s=timeout_s,
    )


@asynccontextmanager
async def swept(timeout_s: float) -> AsyncIterator[tuple[RecordingTransport, BackendLink, trio.Nursery]]:
    """A link whose sweep runs, over a transport that records what the link writes."""
    transport = RecordingTransport()
    link = link_over(transport, timeout_s)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.sweep)
        yield transport, link, nursery
        nursery.cancel_scope.cancel()


def call(call_id: int) -> Call:
    return Call(call_id, "tools/call", {"name": "slow"}, "s1", ReplySlot())


async def test_a_call_unanswered_in_time_is_answered_by_the_sweep_and_cancelled_at_the_backend(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with swept(3.0) as (transport, link, _):
        first, second = call(1), call(2)
        link.frame_for(first)
        await trio.sleep(1.0)
        link.frame_for(second)
        reply = await first.reply_to.wait()  # type: ignore[union-attr]
        assert reply.error is not None and reply.error.code == REQUEST_TIMEOUT
        assert trio.current_time() == 3.0 and "did not answer tools/call within 3.0s" in reply.error.message
        assert reply.error.data == {"backend": "alpha"}
        await transport.wrote.wait()
        assert transport.sent == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1, "reason": "no answer within 3.0s"},
            }
        ]
        assert not second.reply_to.filled  # type: ignore[union-attr]
        await second.reply_to.wait()  # type: ignore[union-attr]
        assert trio.current_time() == 4.0 and link.inflight == {}


async def test_answered_and_cancelled_calls_leave_the_sweep_nothing_to_do(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with swept(3.0) as (transport, link, nursery):
        answered, cancelled = call(1), call(2)
        link.frame_for(answered)
        link.frame_for(cancelled)
        link._dispatch_any(Response(1, {"content": []}), nursery)
        assert link.cancel_frame(Cancel(2, "by the client")) is not None
        await trio.sleep(10.0)
        assert answered.reply_to.filled and not cancelled.reply_to.filled  # type: ignore[union-attr]
        assert transport.sent == [] and link.inflight == {}


async def test_a_call_made_after_the_table_emptied_is_swept_at_its_own_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sweep's timer is set by the first call and left as it is while it is set (one timer update per
    timeout, not per call); a wake-up with nothing due sets it for the oldest call left."""
    async with swept(3.0) as (_, link, nursery):
        link.frame_for(call(1))  # the timer: 3.0
        link._dispatch_any(Response(1, {"content": []}), nursery)  # answered: the table is empty
        await trio.sleep(2.0)
        later = call(2)
        link.frame_for(later)  # due at 5.0; the timer still says 3.0
        reply = await later.reply_to.wait()  # type: ignore[union-attr]
        assert reply.error is not None and reply.error.code == REQUEST_TIMEOUT
        assert trio.current_time() == 5.0


@attrs.define
class FeedingTransport(RecordingTransport):
    """Gives the link the frames put in `incoming`, then nothing more."""

    incoming: list[bytes] = attrs.field(factory=list)

    async def receive(self) -> bytes | None:
        if self.incoming:
            return self.incoming.pop(0)
        await trio.sleep_forever()
        return None


async def test_an_answer_with_an_integer_beyond_64_bits_fails_its_call_and_a_request_is_refused() -> None:
    transport = FeedingTransport()
    link = link_over(transport)
    rounded = call(1)
    link.frame_for(rounded)
    transport.incoming += [
        b'{"jsonrpc":"2.0","id":1,"result":{"n":18446744073709551616}}',
        b'{"jsonrpc":"2.0","id":"b7","method":"sampling/createMessage","params":{"n":-9223372036854775809}}',
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.read, nursery)
        reply = await rounded.reply_to.wait()  # type: ignore[union-attr]
        await transport.wrote.wait()
        nursery.cancel_scope.cancel()
    assert reply.error is not None and reply.error.data == {"backend": "alpha"}
    assert "backend 'alpha' answered tools/call" in reply.error.message
    assert "18446744073709551616 is outside 64 bits" in reply.error.message
    assert link.inflight == {}
    (refusal,) = transport.sent
    assert refusal["id"] == "b7" and refusal["error"]["code"] == -32602  # type: ignore[index]


@pytest.mark.parametrize("params", [None, {}, {"name": "echo", "arguments": {"text": "é\n"}}, [1, 2]])
def test_a_legacy_backends_request_frame_is_the_codecs_encoding_of_the_request(params: object) -> None:
    call = Call(7, "tools/call", params, "s", ReplySlot())  # type: ignore[arg-type]
    assert request_frame(call) == encode(Request(7, "tools/call", params))  # type: ignore[arg-type]


async def test_a_plain_answer_reaches_its_caller_with_its_results_bytes_and_a_second_id_does_not() -> None:
    transport = FeedingTransport()
    link = link_over(transport)
    first, second = call(1), call(2)
    link.frame_for(first)
    link.frame_for(second)
    transport.incoming += [
        b'{"jsonrpc":"2.0","id":2,"result":{"a":1},"id":7}',  # decode's: id 7, unknown, dropped
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}',
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.read, nursery)
        reply = await first.reply_to.wait()  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()
    assert reply.result == {"content": []} and bytes(reply.raw) == b'{"content":[]}'
    assert list(link.inflight) == [2]  # the answer with a second id answered nothing


async def test_a_backends_error_is_redacted_before_anyone_sees_it() -> None:
    """A backend's JSON-RPC error goes to a client, the log and a span: its message and data are redacted
    where they enter the gateway (a secret it was given, echoed back)."""
    secret = "backend-secret-8f14e45fceea"
    REDACTOR.know("test-connection", {"env:BACKEND_SECRET": secret})
    try:
        link = link_over(RecordingTransport())
        asked = call(5)
        link.frame_for(asked)
        async with trio.open_nursery() as nursery:
            error = RpcError(-32000, f"bad key {secret}", {"env": [f"KEY={secret}"], "n": 1})
            link._dispatch(ErrorResponse(5, error), nursery)
        reply = await asked.reply_to.wait()  # type: ignore[union-attr]
    finally:
        REDACTOR.know("test-connection", {})
    assert reply.error == RpcError(
        -32000,
        "bad key [REDACTED:env:BACKEND_SECRET]",
        {"env": ["KEY=[REDACTED:env:BACKEND_SECRET]"], "n": 1},
    )
