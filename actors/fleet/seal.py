"""The fleet's seal: AES-256-GCM with the fleet keys, for what one replica hands a client and another
replica must trust (legacy HTTP session ids, and what names their owner).

Text form: base64url without padding of nonce (12 random bytes) + ciphertext + tag (16 bytes). `purpose`
is the associated data, so a value sealed for one use never opens for another. The first key seals; every
key opens (rotation). Opening fails alike, with None, for anything not sealed by one of the keys, unchanged.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Final

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES: Final = 12  # GCM's own; random per seal (2^32 seals per key keep collisions negligible)
TAG_BYTES: Final = 16
MAX_SEALED_CHARS: Final = 512  # anything longer is not ours: refused before any decoding


@attrs.frozen
class FleetSeal:
    """Owns: the fleet keys' ciphers (the first seals, each opens). Immutable; shared by every task."""

    _ciphers: tuple[AESGCM, ...] = attrs.field(repr=False)

    @classmethod
    def of(cls, keys: tuple[bytes, ...]) -> FleetSeal:
        if not keys:
            raise ValueError("the fleet needs at least one key")
        return cls(tuple(AESGCM(key) for key in keys))

    def seal(self, plaintext: bytes, purpose: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        return _encode(nonce + self._ciphers[0].encrypt(nonce, plaintext, purpose))

    def open(self, text: object, purpose: bytes) -> bytes | None:
        """The plaintext `text` holds when one of the keys sealed it for `purpose`; else None."""
        if not isinstance(text, str) or not 0 < len(text) <= MAX_SEALED_CHARS or not text.isascii():
            return None
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) < NONCE_BYTES + TAG_BYTES or _encode(raw) != text:  # canonical only: one text per value
            return None
        nonce, body = raw[:NONCE_BYTES], raw[NONCE_BYTES:]
        for cipher in self._ciphers:
            try:
                return cipher.decrypt(nonce, body, purpose)
            except InvalidTag:
                continue
        return None


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
