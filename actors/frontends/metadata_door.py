"""The WebSocket listener's one plain HTTP answer: its RFC 9728 Protected Resource Metadata, so that a client
refused at the handshake (401, `resource_metadata="…"`) finds the document on the same port.

Before the WebSocket handshake, the request head is read (at most MAX_HEAD_BYTES, within the handshake's
time). A `GET` of a metadata path without `Upgrade` is answered here and the connection closed; anything
else goes on to the WebSocket library with the bytes read so far replayed first.
"""

from __future__ import annotations

from typing import Final

import trio

from actors.identity.metadata import WELL_KNOWN

MAX_HEAD_BYTES: Final = 16 * 1024  # a handshake's head, bearer token included, fits in this


class Replayed(trio.abc.Stream):
    """A stream whose first reads return bytes already read from it."""

    def __init__(self, stream: trio.SocketStream, head: bytes) -> None:
        self.stream, self._head = stream, head
        self.socket = stream.socket

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            size = len(self._head) if max_bytes is None else max_bytes
            chunk, self._head = self._head[:size], self._head[size:]
            await trio.lowlevel.checkpoint()
            return chunk
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def read_head(stream: trio.SocketStream) -> bytes:
    """The bytes of the request head (and whatever came with them), up to MAX_HEAD_BYTES."""
    head = b""
    while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
        chunk = await stream.receive_some(MAX_HEAD_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    return head


def metadata_request(head: bytes) -> tuple[str, str] | None:
    """A plain GET (no Upgrade) of a path under the metadata's well-known prefix: the path and its Host
    header ("" if none); else None. Which document (if any) a path has is the listener's to say."""
    request_line, _, rest = head.partition(b"\r\n")
    parts = request_line.split(b" ")
    if len(parts) != 3 or parts[0] != b"GET":
        return None
    path = parts[1].decode("latin-1").partition("?")[0]
    fields = dict(_field(line) for line in rest.split(b"\r\n") if b":" in line)
    if "upgrade" in fields or not path.startswith(WELL_KNOWN):
        return None
    return path, fields.get("host", "")


def _field(line: bytes) -> tuple[str, str]:
    name, _, value = line.decode("latin-1").partition(":")
    return name.strip().lower(), value.strip()


async def answer_metadata(stream: trio.SocketStream, document: bytes) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\naccess-control-allow-origin: *\r\n"
        + f"content-length: {len(document)}\r\nconnection: close\r\n\r\n".encode()
    )
    await stream.send_all(head + document)
