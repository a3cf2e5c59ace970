"""Legacy HTTP session ids that name their owner replica, sealed so that no client can forge or alter one.

An id is the fleet seal of: 16 random bytes (what makes it unguessable and unique) + the owner replica's
name. Any replica holding the fleet keys reads the owner from it; a tampered id, one sealed with a key no
longer listed, or one of another fleet opens to nothing, and its request gets 404 like an unknown id.
"""

from __future__ import annotations

import secrets
from typing import Final

import attrs

from actors.fleet.seal import FleetSeal

PURPOSE: Final = b"mcp-gateway/http-session-id/v1"
RANDOM_BYTES: Final = 16  # 128 bits: unguessable, and unique across the fleet without coordination


@attrs.frozen
class SessionIds:
    """Mints and reads this fleet's session ids; `replica` is this replica's name."""

    seal: FleetSeal
    replica: str

    def mint(self) -> str:
        return self.seal.seal(secrets.token_bytes(RANDOM_BYTES) + self.replica.encode("ascii"), PURPOSE)

    def owner(self, session_id: object) -> str | None:
        """The replica that minted `session_id`, or None when the fleet did not mint it, unchanged."""
        plain = self.seal.open(session_id, PURPOSE)
        if plain is None or len(plain) <= RANDOM_BYTES:
            return None
        try:
            return plain[RANDOM_BYTES:].decode("ascii")
        except UnicodeDecodeError:
            return None
