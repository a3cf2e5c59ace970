"""The WebSocket listener's plain-HTTP door for its metadata: only a GET of a metadata path without Upgrade
is answered there; every other head, handshakes included, goes on to the WebSocket library unchanged."""

from __future__ import annotations

import trio
import trio.testing

from actors.frontends.metadata_door import MAX_HEAD_BYTES, Replayed, metadata_request, read_head

PRM = b"GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: localhost:8765\r\n\r\n"


def test_only_a_plain_get_of_a_metadata_path_is_a_metadata_request() -> None:
    assert metadata_request(PRM) == ("/.well-known/oauth-protected-resource/mcp", "localhost:8765")
    bare = b"GET /.well-known/oauth-protected-resource HTTP/1.1\r\n\r\n"
    assert metadata_request(bare) == ("/.well-known/oauth-protected-resource", "")
    route = b"GET /.well-known/oauth-protected-resource/dev?x=1 HTTP/1.1\r\n\r\n"  # the listener says
    assert metadata_request(route) == ("/.well-known/oauth-protected-resource/dev", "")  # if it has one
    upgrade = PRM.replace(b"\r\n\r\n", b"\r\nUpgrade: websocket\r\n\r\n")
    for head in (
        upgrade,
        PRM.replace(b"GET", b"POST"),
        b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"\x00\x01 garbage \xff\r\n\r\n",
        b"",
    ):
        assert metadata_request(head) is None


async def test_the_head_is_read_up_to_its_end_or_the_cap_and_replayed_whole() -> None:
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(PRM + b"after")
    head = await read_head(server)  # type: ignore[arg-type]
    assert head.startswith(PRM)
    client2, server2 = trio.testing.memory_stream_pair()
    await client2.send_all(b"x" * (MAX_HEAD_BYTES + 10))
    assert len(await read_head(server2)) == MAX_HEAD_BYTES  # type: ignore[arg-type]
    server.socket = None  # type: ignore[attr-defined]
    replayed = Replayed(server, head)  # type: ignore[arg-type]
    await client.send_all(b"-more")
    received = b""
    while not received.endswith(b"-more"):
        received += await replayed.receive_some(7)
    assert received == head + b"-more"
