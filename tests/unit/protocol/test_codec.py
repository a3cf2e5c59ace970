"""The wire codec: classification by envelope, one error answer for every bad frame."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.protocol import codec, exact_integers
from actors.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    InexactIntegerError,
    MessageError,
)
from actors.protocol.messages import Batch, ErrorResponse, Notification, Request, Response, RpcError


def test_request_notification_and_responses_are_told_apart() -> None:
    assert codec.decode(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == Request(1, "ping")
    assert codec.decode(b'{"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}}') == Request(
        "a", "x", {"k": 1}
    )
    assert codec.decode(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == Notification(
        "notifications/initialized"
    )
    assert codec.decode(b'{"jsonrpc":"2.0","id":7,"result":{"ok":true}}') == Response(7, {"ok": True})
    decoded = codec.decode(b'{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m","data":[1]}}')
    assert decoded == ErrorResponse(7, RpcError(-1, "m", [1]))


def test_a_batch_decodes_each_element_on_its_own() -> None:
    batch = codec.decode(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},2,{"jsonrpc":"2.0","method":"n"},{"id":3}]'
    )
    assert isinstance(batch, Batch)
    first, second, third, fourth = batch.items
    assert first == Request(1, "ping") and third == Notification("n")
    assert isinstance(second, ErrorResponse) and second.id is None and second.error.code == INVALID_REQUEST
    assert isinstance(fourth, ErrorResponse) and fourth.id == 3 and fourth.error.code == INVALID_REQUEST
    assert orjson.loads(codec.encode(Batch((Response(1, {}), fourth)))) == [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "error": fourth.error.to_wire()},
    ]


@pytest.mark.parametrize(
    ("frame", "code", "request_id"),
    [
        (b"{not json", PARSE_ERROR, None),
        (b"\xff\xfe", PARSE_ERROR, None),
        (b"[]", INVALID_REQUEST, None),
        (b"42", INVALID_REQUEST, None),
        (b'{"id":1,"method":"x"}', INVALID_REQUEST, 1),
        (b'{"jsonrpc":"1.0","id":"q","method":"x"}', INVALID_REQUEST, "q"),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":null,"method":"x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":3,"method":5}', INVALID_REQUEST, 3),
        (b'{"jsonrpc":"2.0","id":3,"method":"x","params":"s"}', INVALID_REQUEST, 3),
        (b'{"jsonrpc":"2.0","id":4}', INVALID_REQUEST, 4),
        (b'{"jsonrpc":"2.0","id":4,"result":1,"error":{}}', INVALID_REQUEST, 4),
        (b'{"jsonrpc":"2.0","id":4,"error":{"code":"x","message":"m"}}', INVALID_REQUEST, 4),
    ],
)
def test_bad_frames_carry_the_answer_they_deserve(frame: bytes, code: int, request_id: object) -> None:
    with pytest.raises(MessageError) as caught:
        codec.decode(frame)
    assert caught.value.error.code == code
    assert caught.value.request_id == request_id


def test_encode_round_trips_and_omits_absent_members() -> None:
    assert orjson.loads(codec.encode(Notification("n"))) == {"jsonrpc": "2.0", "method": "n"}
    assert orjson.loads(codec.encode(ErrorResponse(None, RpcError(-32700, "bad")))) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "bad"},
    }
    for message in (Request(1, "m", {"a": [1]}), Response("x", {"r": None}), Notification("n", {"p": 1})):
        assert codec.decode(codec.encode(message)) == message


@given(st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_message_error(frame: bytes) -> None:
    try:
        codec.decode(frame)
    except MessageError as exc:
        assert exc.error.code in (PARSE_ERROR, INVALID_REQUEST)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "id": st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=5) | json_values,
        "method": st.text(max_size=10) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)


@given(envelopes)
def test_arbitrary_json_objects_never_escape_as_other_errors(obj: dict[str, object]) -> None:
    try:
        message = codec.decode(orjson.dumps(obj))
    except MessageError as exc:
        assert exc.error.code == INVALID_REQUEST
        return
    assert codec.decode(codec.encode(message)) == message


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":3', b"...", 7),
        (b'{ "jsonrpc": "2.0", "id": "a\\"b", "method": "x", "params": {', b"...", 'a"b'),
        (b'{"result":{"id":3,"x":"', b'xyz"}]},"jsonrpc":"2.0","id":12}', 12),  # id last, as JS writes it
        (b'{"result":{"id":3,"x":"', b'xyz","id":5}]}}', None),  # a nested id is never taken
        (b'{"method":"tools/call","params":{"id":4', b"...", None),
        (b'{"jsonrpc":"2.0","id":true,"result":', b"...", None),
    ],
)
def test_the_id_of_an_oversized_message_is_read_only_when_certain(
    head: bytes, tail: bytes, expected: object
) -> None:
    assert codec.find_request_id(head, tail) == expected


# --- integers beyond 64 bits: refused, never rounded ------------------------------------------------------


@given(st.integers(min_value=exact_integers.INTEGER_MIN, max_value=exact_integers.INTEGER_MAX))
def test_an_integer_within_64_bits_passes_exactly(value: int) -> None:
    frame = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n":%d,"s":"%d"}}' % (value, value)
    request = codec.decode(frame)
    assert isinstance(request, Request) and request.params == {"n": value, "s": str(value)}
    assert type(request.params["n"]) is int  # type: ignore[index]
    assert orjson.loads(codec.encode(request))["params"]["n"] == value


@given(
    st.one_of(
        st.integers(min_value=exact_integers.INTEGER_MAX + 1, max_value=10**60),
        st.integers(min_value=-(10**60), max_value=exact_integers.INTEGER_MIN - 1),
    )
)
def test_an_integer_beyond_64_bits_is_refused_with_the_request_id(value: int) -> None:
    frame = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"deep":[{"n":%d}]}}' % value
    with pytest.raises(InexactIntegerError) as caught:
        codec.decode(frame)
    assert caught.value.request_id == 9 and not caught.value.response
    assert caught.value.error.code == INVALID_PARAMS
    assert str(value)[:40] in caught.value.error.message and "outside 64 bits" in caught.value.error.message


def test_an_answer_with_an_integer_beyond_64_bits_is_told_as_an_answer() -> None:
    with pytest.raises(InexactIntegerError) as caught:
        codec.decode(b'{"jsonrpc":"2.0","id":"c1","result":{"n":99999999999999999999}}')
    assert caught.value.request_id == "c1" and caught.value.response


def test_long_digit_runs_in_strings_and_floats_are_not_integers() -> None:
    frame = b'{"jsonrpc":"2.0","id":1,"result":{"s":"123456789012345678901234","f":12345678901234567890.5}}'
    assert codec.decode(frame) == Response(1, {"s": "123456789012345678901234", "f": 12345678901234567890.5})


def test_in_a_batch_only_the_element_with_an_inexact_integer_is_refused() -> None:
    batch = codec.decode(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},'
        b'{"jsonrpc":"2.0","id":2,"method":"x","params":{"n":-9223372036854775809}}]'
    )
    assert isinstance(batch, Batch)
    first, second = batch.items
    assert first == Request(1, "ping")
    assert isinstance(second, ErrorResponse) and second.id == 2 and second.error.code == INVALID_PARAMS


def test_a_frame_given_as_a_memoryview_or_text_is_checked_alike() -> None:
    frame = b'{"jsonrpc":"2.0","id":4,"method":"x","params":{"n":123456789012345678901234}}'
    for form in (memoryview(frame), frame.decode()):
        with pytest.raises(InexactIntegerError):
            codec.decode(form)


@given(st.binary(max_size=80) | st.text(alphabet="0123456789a\u0660\u00e9", max_size=80).map(str.encode))
def test_the_long_integer_scan_finds_exactly_the_runs_of_19_ascii_digits(frame: bytes) -> None:
    expected = exact_integers._LONG_DIGITS.search(frame) is not None
    assert exact_integers.may_hold_long_integers(frame) is expected
    assert exact_integers.may_hold_long_integers(bytearray(frame)) is expected
    assert exact_integers.may_hold_long_integers(memoryview(frame)) is expected
    assert exact_integers.may_hold_long_integers(frame.decode("latin-1")) is expected
