"""What an HTTP session's streams keep for its client counts as unread until an HTTP response writes it,
and every way it stops being kept gives it back (issue #34, point 4): written, its stream forgotten
(cancelled, expired, answered to nobody), pushed out of a full stream, the client dropped. And a session
holds at most max_streams request streams."""

from __future__ import annotations

import tracemalloc

import attrs
import orjson
import pytest
import trio

from actors.frontends.auth import RequestRefused
from actors.frontends.http.request_cut import RequestCut, serving
from actors.frontends.http.transport import REPLAY_EVENTS, HttpSessionTransport


@attrs.define
class Ledger:
    """Answers' side, as a transport sees it: what it holds in total."""

    unread: int = 0

    def hold(self, size: int) -> None:
        self.unread += size

    def written(self, size: int) -> None:
        self.unread -= size


def answer(request_id: int, text: str = "x") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"text": text}})


def counted(transport: HttpSessionTransport) -> Ledger:
    ledger = Ledger()
    transport.count_unread_in(ledger)
    return ledger


async def test_an_answer_counts_until_it_is_written_and_then_its_stream_is_forgotten() -> None:
    transport = HttpSessionTransport()
    ledger = counted(transport)
    stream = transport.open_request(1, None)
    assert stream is not None
    await transport.send_many([answer(1, "a" * 1000)])
    assert ledger.unread == len(answer(1, "a" * 1000)) == transport.tally.unwritten
    stream.wrote(1)
    assert ledger.unread == 0
    transport.forget(stream)
    assert ledger.unread == 0  # given back once, not twice


async def test_an_answer_nobody_writes_is_given_back_when_its_stream_is_forgotten() -> None:
    transport = HttpSessionTransport()
    ledger = counted(transport)
    stream = transport.open_request("a", None)
    assert stream is not None
    await transport.send_many([answer(1), orjson.dumps({"jsonrpc": "2.0", "id": "a", "result": {}})])
    assert ledger.unread > 0  # the one for id 1 was dropped at once (no stream waits for it): not kept
    transport.forget(stream)  # the client went away and did not come back within resume_window_s
    assert ledger.unread == 0
    stream.wrote(stream.last_number)  # a late writer cannot give it back twice
    assert ledger.unread == 0


async def test_what_a_full_stream_pushes_out_unwritten_is_given_back() -> None:
    transport = HttpSessionTransport()
    ledger = counted(transport)
    changed = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    await transport.send_many([changed] * (REPLAY_EVENTS + 10))
    assert ledger.unread == REPLAY_EVENTS * len(changed)  # what the standalone stream still keeps


async def test_a_dropped_client_gives_back_everything_and_its_readers_are_cut() -> None:
    transport = HttpSessionTransport()
    ledger = counted(transport)
    stream = transport.open_request(1, None)
    assert stream is not None
    reader = RequestCut(None, lambda: False)
    with serving(reader), transport.reading(stream):
        await transport.send_many([answer(1, "b" * 5000)])
        assert ledger.unread > 5000
        transport.drop_client()
        assert reader.done and reader.scope.cancel_called
        await trio.lowlevel.checkpoint()
    assert ledger.unread == 0
    late = RequestCut(None, lambda: False)
    with serving(late), transport.reading(transport.standalone):  # a request that comes after
        assert late.done
        await trio.lowlevel.checkpoint()


async def test_a_session_holds_at_most_max_streams_request_streams() -> None:
    transport = HttpSessionTransport(max_streams=2)
    first, second = transport.open_request(1, None), transport.open_request(2, None)
    assert first is not None and second is not None
    with pytest.raises(RequestRefused) as refused:
        transport.open_request(3, None)
    assert refused.value.status == 429 and refused.value.request_id == 3
    assert (b"retry-after", b"5") in refused.value.headers
    transport.forget(first)  # answered and written, or given up: its slot is free
    assert transport.open_request(3, None) is not None


async def test_what_a_stream_keeps_holds_what_it_counts() -> None:
    # orjson's output holds its unshrunk write buffer (~10x a 3 kB text): kept as it came, a stream held
    # ten times what max_unread_bytes counted.
    transport = HttpSessionTransport()
    ledger = counted(transport)
    streams = [transport.open_request(n, None) for n in range(50)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await transport.send_many([answer(n, "x" * 3000) for n in range(50)])  # as the writer's encode made
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(streams) and held < 2 * ledger.unread, (held, ledger.unread)
