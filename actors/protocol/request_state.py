"""Sealed `requestState`: what the gateway hands a modern client with `input_required` and gets back on its
retry (MCP 2026-07-28 multi round-trip requests).

The client echoes the state byte for byte, but it is attacker-controlled: the gateway signs it and refuses
any it did not sign, unchanged, recently. Format: `v1.` + base64url(JSON payload with `exp`) + `.` +
base64url(HMAC-SHA256 over everything before the second dot), base64url without padding and only in its
canonical form, so that every change of a character is a different state. Signed, not encrypted: the
client can read the payload, so it holds routing facts and digests, never secrets.

Times are wall-clock seconds (`time.time()`), given by the caller: a state may come back to another
instance sharing the key, and trio's clock is per process.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from functools import partial
from typing import Any, Final

import attrs
import orjson

from actors.protocol.errors import INVALID_PARAMS, GatewayError
from actors.protocol.messages import RpcError

STATE_VERSION: Final = "v1"
KEY_BYTES: Final = 32  # HMAC-SHA256's own size: a longer key adds nothing
MAX_STATE_CHARS: Final = 64 * 1024  # room for a modern backend's own state wrapped inside the gateway's
EXPIRY_FIELD: Final = "exp"  # in the payload: wall-clock seconds after which the state is refused


class RequestStateError(GatewayError):
    """A requestState the gateway did not seal, or no longer honours. `reason` is short and names no part
    of the state: fit for a log line and for the client's -32602."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def to_rpc_error(self) -> RpcError:
        """The client's answer: -32602 (in band, HTTP 200); it starts the request over."""
        return RpcError(INVALID_PARAMS, f"Invalid requestState: {self.reason}", {"reason": self.reason})


def _check_key(instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != KEY_BYTES:
        raise ValueError(f"a requestState key is {KEY_BYTES} bytes")


@attrs.frozen(slots=True)
class RequestStateKey:
    """The key requestStates are signed with: random for this process unless given (instances behind one
    address must share it, or a retry landing on another one is refused)."""

    secret: bytes = attrs.field(
        factory=partial(secrets.token_bytes, KEY_BYTES), validator=_check_key, repr=False
    )
    max_chars: int = MAX_STATE_CHARS  # the longest state sealed or opened

    def seal(self, payload: dict[str, Any], *, ttl_s: float, now: float) -> str:
        """`payload` (JSON with str keys, no `exp` of its own; NaN and infinities come back null) as a state
        good until `now + ttl_s`.
        Raises ValueError when `payload` holds `exp` or the state would exceed `max_chars`."""
        if EXPIRY_FIELD in payload:
            raise ValueError(f"a requestState payload may not hold {EXPIRY_FIELD!r}: the seal sets it")
        signed = f"{STATE_VERSION}.{_encode(orjson.dumps({**payload, EXPIRY_FIELD: now + ttl_s}))}"
        state = f"{signed}.{_encode(self._tag(signed))}"
        if len(state) > self.max_chars:
            raise ValueError(f"a requestState of {len(state)} characters exceeds {self.max_chars}")
        return state

    def open(self, state: object, *, now: float) -> dict[str, Any]:
        """`open_expiring`'s payload alone."""
        return self.open_expiring(state, now=now)[0]

    def open_expiring(self, state: object, *, now: float) -> tuple[dict[str, Any], float]:
        """The payload of a state this key sealed, without `exp`, and its expiry. Raises RequestStateError,
        and nothing else, for anything else: not a string, too long, not three dot-separated parts starting
        with v1, not canonical base64url, a tag that does not match, not a JSON object, expired (`now` >=
        exp)."""
        if not isinstance(state, str):
            raise RequestStateError("not a string")
        if len(state) > self.max_chars:
            raise RequestStateError("too long")
        parts = state.split(".")
        if len(parts) != 3 or parts[0] != STATE_VERSION:
            raise RequestStateError("bad format")
        body, tag = _decode(parts[1]), _decode(parts[2])
        if not hmac.compare_digest(tag, self._tag(f"{parts[0]}.{parts[1]}")):
            raise RequestStateError("bad tag")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise RequestStateError("not JSON") from None
        if not isinstance(payload, dict):
            raise RequestStateError("not a JSON object")
        expiry = payload.pop(EXPIRY_FIELD, None)
        if not isinstance(expiry, int | float) or isinstance(expiry, bool):
            raise RequestStateError("no expiry")
        if now >= expiry:
            raise RequestStateError("expired")
        return payload, float(expiry)

    def _tag(self, signed: str) -> bytes:
        return hmac.new(self.secret, signed.encode("ascii"), hashlib.sha256).digest()


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    """Unpadded base64url, canonical only: the decoder skips stray characters and ignores a last
    character's spare bits, so the text must be exactly what encoding its bytes gives back."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise RequestStateError("bad base64") from None
    if _encode(raw) != text:
        raise RequestStateError("bad base64")
    return raw
