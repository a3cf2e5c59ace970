"""A backend's answer in the plain form keeps its result's bytes and is written on under the client's id as
they are; anything not certainly of that form is left to `decode`, with its errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from actors.protocol import codec
from actors.protocol.envelopes import Reply
from actors.protocol.errors import InexactIntegerError, MessageError
from actors.protocol.exact_integers import may_hold_long_integers
from actors.protocol.messages import Encoded, Message, Response
from actors.session.inflight import Answers, InFlightTable

# what a frame holds without a run of 19 digits (such a frame is decode's: it checks its long integers)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**18) + 1, 10**18 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(
    call_id=st.integers(0, 10**18 - 1), result=st.dictionaries(st.text(max_size=8), json_values, max_size=5)
)
def test_a_plain_answer_is_written_under_the_clients_id_as_encode_would_write_it(
    call_id: int, result: dict[str, Any]
) -> None:
    frame = orjson.dumps({"jsonrpc": "2.0", "id": call_id, "result": result})
    plain = codec.plain_answer(frame)
    if plain is None:  # a run of 19 digits (a float's, say): decode's, which checks its long integers
        assert may_hold_long_integers(frame)
        return
    got_id, got_result, raw = plain
    assert (got_id, got_result) == (call_id, result)
    for client_id in (3, 'client "7"\n'):
        assert codec.encode(Response(client_id, result, raw)) == codec.encode(Response(client_id, result))


def test_the_backends_bytes_are_what_the_client_gets() -> None:
    frame = b'{"jsonrpc":"2.0","id":41,"result":{ "text" : "caf\\u00e9",  "n": 1.50 }}'
    plain = codec.plain_answer(frame)
    assert plain is not None and plain[0] == 41
    written = codec.encode(Response("a", plain[1], plain[2]))
    assert written == b'{"jsonrpc":"2.0","id":"a","result":{ "text" : "caf\\u00e9",  "n": 1.50 }}'
    assert orjson.loads(written) == {"jsonrpc": "2.0", "id": "a", "result": {"text": "café", "n": 1.5}}


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc":"2.0","id":5,"result":{},"id":6}',  # a second top-level id: decode reads 6
        b'{"jsonrpc":"2.0","id":5,"result":{},"id":5,"result":{}}',  # every member twice
        b'{"jsonrpc":"2.0","id":5,"result":{"a":1},"error":{"code":1,"message":"m"}}',  # both
        b'{"jsonrpc":"2.0","id":05,"result":{}}',  # not JSON
        b'{"jsonrpc":"2.0","id":-5,"result":{}}',
        b'{"jsonrpc":"2.0","id":"5","result":{}}',
        b'{"jsonrpc":"2.0","id":5.0,"result":{}}',
        b'{"jsonrpc":"2.0","id":,"result":{}}',
        b'{"jsonrpc":"2.0","id":5,"result":[]}',
        b'{"jsonrpc":"2.0","id":5,"result":"text"}',
        b'{"jsonrpc":"2.0","id":5,"result":{"a":}}',
        b'{"jsonrpc":"2.0","id":5,"result":{"a":"\\ud800"}}',  # a lone surrogate
        b'{"jsonrpc":"2.0","id":5,"result":{"n":18446744073709551616}}',
        b'{"jsonrpc":"2.0","id":5,"result":{"n":1e400}}',
        b'{"jsonrpc":"2.0","id":5,"result":' + b'{"a":' * 300 + b"1" + b"}" * 300 + b"}",
        b'{"jsonrpc":"2.0","id":5,"result":{}} ',
        b'{"jsonrpc":"2.0","id":5,"result":{}}}',
        b'{"jsonrpc":"2.0","id":123456789012345678901234,"result":{}}',
        b'{"jsonrpc":"2.0","id":5,"result":{}',
    ],
)
def test_anything_not_certainly_plain_is_left_to_decode(frame: bytes) -> None:
    assert codec.plain_answer(frame) is None
    try:
        message = codec.decode(frame)
    except (MessageError, InexactIntegerError):
        return
    assert not isinstance(message, Response) or message.raw is None


def test_a_str_frame_is_left_to_decode() -> None:
    assert codec.plain_answer('{"jsonrpc":"2.0","id":5,"result":{}}') is None


def test_the_clients_answer_keeps_the_bytes_only_while_its_result_is_the_backends() -> None:
    outbox_send, outbox_recv = trio.open_memory_channel[Message | Encoded](4)
    written: list[Message] = []  # what an idle writer is handed
    table = InFlightTable(Answers(outbox_send, write_now=lambda message: not written.append(message)))
    raw = memoryview(b'{"ok":true}')
    table.accept(1).fill(Reply(result={"ok": True}, raw=raw))
    renamed = table.accept(2)
    renamed.rewrite = lambda result: {**result, "renamed": True}
    renamed.fill(Reply(result={"ok": True}, raw=raw))
    kept, rewritten = written
    assert kept.raw is raw and codec.encode(kept) == b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}'
    assert rewritten.raw is None
    assert orjson.loads(codec.encode(rewritten))["result"] == {"ok": True, "renamed": True}
    assert outbox_recv.statistics().current_buffer_used == 0  # both written by the idle writer
