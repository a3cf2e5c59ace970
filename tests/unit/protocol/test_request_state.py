"""Sealed requestState: what was sealed opens unchanged until it expires; anything else is refused with a
RequestStateError, and with nothing else."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol.errors import INVALID_PARAMS
from actors.protocol.request_state import MAX_STATE_CHARS, RequestStateError, RequestStateKey

KEY = RequestStateKey(bytes(range(32)))
NOW = 1_800_000_000.0  # wall-clock seconds, fixed
PAYLOAD = {"kind": "bridge", "backend": "b", "method": "tools/call", "name": "t", "principal": None}


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def forge(body: bytes, key: RequestStateKey = KEY) -> str:
    """A state with any body, signed as the format says (an independent writer of the format)."""
    signed = f"v1.{b64(body)}"
    return f"{signed}.{b64(hmac.new(key.secret, signed.encode(), hashlib.sha256).digest())}"


def reason(state: object, now: float = NOW) -> str:
    with pytest.raises(RequestStateError) as refused:
        KEY.open(state, now=now)
    return refused.value.reason


def test_a_sealed_state_opens_to_its_payload_until_it_expires() -> None:
    state = KEY.seal(PAYLOAD, ttl_s=300, now=NOW)
    assert state.startswith("v1.") and state.count(".") == 2 and state.isascii()
    assert KEY.open(state, now=NOW) == PAYLOAD
    assert KEY.open(state, now=NOW + 299.9) == PAYLOAD
    assert reason(state, now=NOW + 300) == "expired"
    assert orjson.loads(base64.urlsafe_b64decode(state.split(".")[1] + "==")) == {**PAYLOAD, "exp": NOW + 300}


def test_the_format_is_exactly_the_documented_one() -> None:
    assert KEY.open(forge(orjson.dumps({"a": 1, "exp": NOW + 1})), now=NOW) == {"a": 1}


def test_a_state_sealed_with_another_key_is_refused() -> None:
    assert reason(RequestStateKey().seal(PAYLOAD, ttl_s=300, now=NOW)) == "bad tag"
    assert reason(forge(orjson.dumps({"exp": NOW + 1}), RequestStateKey(b"\x01" * 32))) == "bad tag"


def test_keys_are_random_unless_given_and_exactly_32_bytes() -> None:
    assert RequestStateKey().secret != RequestStateKey().secret
    assert len(RequestStateKey().secret) == 32
    for bad in (b"short", b"x" * 33, "x" * 32):
        with pytest.raises(ValueError, match="32 bytes"):
            RequestStateKey(bad)  # type: ignore[arg-type]
    assert "secret" not in repr(KEY) and str(bytes(range(32))) not in repr(KEY)


def test_seal_refuses_a_payload_holding_exp_or_too_big_to_open() -> None:
    with pytest.raises(ValueError, match="exp"):
        KEY.seal({"exp": 1}, ttl_s=1, now=NOW)
    with pytest.raises(ValueError, match="exceeds"):
        KEY.seal({"blob": "x" * MAX_STATE_CHARS}, ttl_s=1, now=NOW)
    small = RequestStateKey(KEY.secret, max_chars=100)
    with pytest.raises(ValueError, match="exceeds 100"):
        small.seal({"blob": "x" * 100}, ttl_s=1, now=NOW)


@pytest.mark.parametrize(
    ("state", "why"),
    [
        (None, "not a string"),
        (5, "not a string"),
        (b"v1.e30.AA", "not a string"),
        ({"state": 1}, "not a string"),
        ("v1." + "A" * MAX_STATE_CHARS, "too long"),
        ("", "bad format"),
        ("v1", "bad format"),
        ("v1.e30", "bad format"),
        ("v2.e30.AAAA", "bad format"),
        ("v1.e30.AA.AA", "bad format"),
        ("v1.e30=.AA", "bad base64"),
        ("v1.e3.AA", "bad base64"),  # 2 characters decode to 1 byte only with spare bits zero: e3 is not
        ("v1.e!0.AA", "bad base64"),
        ("v1.e+/0.AA", "bad base64"),
        ("v1.ëë.AA", "bad base64"),
        ("v1.A.AA", "bad base64"),
        ("v1.e30.AA", "bad tag"),
        ("v1..", "bad tag"),
        (forge(b"not json"), "not JSON"),
        (forge(b""), "not JSON"),
        (forge(b"[1]"), "not a JSON object"),
        (forge(b'"x"'), "not a JSON object"),
        (forge(b"{}"), "no expiry"),
        (forge(b'{"exp":"soon"}'), "no expiry"),
        (forge(b'{"exp":true}'), "no expiry"),
        (forge(orjson.dumps({"exp": NOW})), "expired"),
    ],
)
def test_what_open_refuses_and_why(state: object, why: str) -> None:
    assert reason(state) == why


def test_a_refusal_becomes_an_in_band_32602() -> None:
    error = RequestStateError("expired").to_rpc_error()
    assert error.code == INVALID_PARAMS and error.message == "Invalid requestState: expired"
    assert error.data == {"reason": "expired"}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
payloads = st.dictionaries(st.text(max_size=12).filter(lambda key: key != "exp"), json_values, max_size=6)


@settings(deadline=None)
@given(payloads, st.floats(0.001, 1e6), st.floats(0, 4e9))
def test_seal_then_open_gives_the_payload_back(payload: dict[str, object], ttl_s: float, now: float) -> None:
    assert KEY.open(KEY.seal(payload, ttl_s=ttl_s, now=now), now=now) == payload


@settings(max_examples=200, deadline=None)
@given(payloads, st.data())
def test_any_one_character_changed_is_refused(payload: dict[str, object], data: st.DataObject) -> None:
    state = KEY.seal(payload, ttl_s=300, now=NOW)
    where = data.draw(st.integers(0, len(state) - 1))
    other = data.draw(st.characters().filter(lambda char: char != state[where]))
    with pytest.raises(RequestStateError):
        KEY.open(state[:where] + other + state[where + 1 :], now=NOW)
    with pytest.raises(RequestStateError):
        KEY.open(state[:where] + state[where + 1 :], now=NOW)


def test_every_single_byte_change_of_one_state_is_refused() -> None:
    state = KEY.seal(PAYLOAD, ttl_s=300, now=NOW)
    alphabet = sorted({chr(code) for code in range(128)} | set(state))
    for where in range(len(state)):
        for char in alphabet:
            if char != state[where]:
                with pytest.raises(RequestStateError):
                    KEY.open(state[:where] + char + state[where + 1 :], now=NOW)


base64_text = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.", max_size=60)


@settings(max_examples=500, deadline=None)
@given(
    st.text() | base64_text.map(lambda text: f"v1.{text}") | st.binary().map(lambda raw: f"v1.{b64(raw)}.x")
)
def test_open_raises_only_request_state_errors_on_any_text(state: str) -> None:
    with pytest.raises(RequestStateError):
        KEY.open(state, now=NOW)
