"""The ids of the gateway's requests to a legacy HTTP client in a fleet (a backend's elicitation, sampling,
roots/list), so that the client's answer finds the replica that asked wherever the balancer sends it.

Inside a process an ask has an integer id, unique in the process (envelopes.next_call_id); its client sees
the fleet seal of that integer + the session's digest + this process run's random tag + the replica's name.
Any replica reads from it which replica asked (and forwards the answer there) and for which session; only
the asking run of the asking replica turns it back into its integer, for the session it was sealed for. So
an id is unique fleet-wide (a replica started again under the same name has another run tag), and one
that is forged, altered, of another session or of an earlier run answers nothing.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from typing import Final

import attrs

from actors.fleet.seal import FleetSeal

PURPOSE: Final = b"mcp-gateway/ask-id/v1"
ASK: Final = struct.Struct(">Q")  # the process's integer id
SESSION_BYTES: Final = 8  # of the session id's digest: tells sessions apart, names none
RUN_BYTES: Final = 8  # this process run of the replica: an earlier run's ids open to nothing here
HEAD_BYTES: Final = ASK.size + SESSION_BYTES + RUN_BYTES


def session_tag(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("ascii", "replace")).digest()[:SESSION_BYTES]


@attrs.frozen
class AskIdSeal:
    """Owns: this replica run's tag. Seals and reads ask ids; immutable, shared by every session here."""

    seal: FleetSeal
    replica: str
    run: bytes = attrs.field(factory=lambda: secrets.token_bytes(RUN_BYTES), repr=False)

    def for_session(self, session_id: str) -> SessionAskIds:
        return SessionAskIds(self, session_tag(session_id))

    def asker(self, session_id: str, request_id: object) -> str | None:
        """The replica that sent `request_id` to the client of `session_id`; None when no replica of this
        fleet sealed it for that session (forged, altered, another session's, not an ask id at all)."""
        opened = self.opened(request_id)
        if opened is None or opened[1] != session_tag(session_id):
            return None
        return opened[3]

    def opened(self, request_id: object) -> tuple[int, bytes, bytes, str] | None:
        """(integer id, session tag, run tag, replica) of an ask id the fleet sealed; else None."""
        plain = self.seal.open(request_id, PURPOSE)
        if plain is None or len(plain) <= HEAD_BYTES:
            return None
        try:
            replica = plain[HEAD_BYTES:].decode("ascii")
        except UnicodeDecodeError:
            return None
        (ask_id,) = ASK.unpack_from(plain)
        session = plain[ASK.size : ASK.size + SESSION_BYTES]
        return ask_id, session, plain[ASK.size + SESSION_BYTES : HEAD_BYTES], replica


@attrs.frozen
class SessionAskIds:
    """One session's ask ids (client_asks.AskIds): sealed going out, opened coming back."""

    seals: AskIdSeal
    session: bytes

    def outward(self, ask_id: int) -> str:
        head = ASK.pack(ask_id) + self.session + self.seals.run
        return self.seals.seal.seal(head + self.seals.replica.encode("ascii"), PURPOSE)

    def inward(self, request_id: object) -> int | None:
        """The integer of an id this run of this replica sealed for this session; else None."""
        opened = self.seals.opened(request_id)
        if opened is None:
            return None
        ask_id, session, run, replica = opened
        if session != self.session or run != self.seals.run or replica != self.seals.replica:
            return None
        return ask_id
