"""The transport interface: a byte stream turned into whole message frames and back.

Sessions and backend actors are written against `Transport` only, so a new transport (WebSocket, Streamable
HTTP) adds a module here and no branch in any actor.
"""

from __future__ import annotations

from typing import Protocol


class Transport(Protocol):
    async def receive(self) -> bytes | None:
        """The next frame (one JSON-RPC message), or None at the end of the stream.

        Raises MessageTooLargeError for a frame over the limit; the transport has skipped it and can go on."""
        ...

    async def send(self, frame: bytes) -> None:
        """Send one frame. Safe to call from several tasks; frames never interleave.
        Raises trio.BrokenResourceError or trio.ClosedResourceError when the peer is gone."""
        ...

    async def aclose(self) -> None: ...
