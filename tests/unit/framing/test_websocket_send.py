"""WebSocketTransport.send against a client that stops reading: over a real loopback connection, on a mock
clock that jumps only when nothing has moved for half a second of real time (loopback is never that slow)."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing
from trio_websocket import wrap_server_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Event, Request, TextMessage

from actors.framing.websocket import CLOSE_POLICY_VIOLATION, CLOSE_WAIT_S, WebSocketTransport

SEND_TIMEOUT_S = 1.0
MESSAGE = "x" * (8 * 1024 * 1024)  # far more than loopback's socket buffers hold


@pytest.fixture
def clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0.5)  # loopback never stalls that long


@attrs.define
class RawClient:
    """A WebSocket client that reads only when told to (trio-websocket's reads all the time)."""

    stream: trio.SocketStream
    ws: WSConnection = attrs.field(factory=lambda: WSConnection(ConnectionType.CLIENT))

    async def handshake(self) -> None:
        await self.stream.send_all(self.ws.send(Request(host="127.0.0.1", target="/mcp")))
        while not any(isinstance(event, AcceptConnection) for event in self.events_now()):
            self.ws.receive_data(await self.stream.receive_some(65536))

    def events_now(self) -> list[Event]:
        return list(self.ws.events())

    async def read_all(self) -> tuple[list[str], int | None]:
        """Every message and the close code, until the connection ends."""
        messages, parts, code = [], [], None
        while True:
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(data or None)
            for event in self.events_now():
                if isinstance(event, TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        messages.append("".join(parts))
                        parts = []
                elif isinstance(event, CloseConnection):
                    code = event.code
            if not data or code is not None:
                return messages, code


async def connected_pair(nursery: trio.Nursery) -> tuple[WebSocketTransport, RawClient]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = RawClient(await trio.open_tcp_stream("127.0.0.1", port))
    server_stream = await listeners[0].accept()
    await listeners[0].aclose()
    async with trio.open_nursery() as handshake:
        handshake.start_soon(client.handshake)
        request = await wrap_server_stream(nursery, server_stream)
        connection = await request.accept()
    return WebSocketTransport(connection, SEND_TIMEOUT_S, server_stream), client


async def test_a_client_that_reads_late_gets_the_whole_frame_then_1008(clock: trio.testing.MockClock) -> None:
    read: list[tuple[list[str], int | None]] = []
    async with trio.open_nursery() as nursery:
        transport, client = await connected_pair(nursery)

        async def read_late() -> None:
            await trio.sleep(SEND_TIMEOUT_S + CLOSE_WAIT_S / 2)  # past the timeout, within the grace
            read.append(await client.read_all())

        nursery.start_soon(read_late)
        with pytest.raises(trio.BrokenResourceError):
            await transport.send(MESSAGE.encode())
    assert read == [([MESSAGE], CLOSE_POLICY_VIOLATION)]  # the frame whole, then our close


async def test_a_client_that_never_reads_loses_its_connection(clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        transport, client = await connected_pair(nursery)
        started = trio.current_time()
        with pytest.raises(trio.BrokenResourceError):
            await transport.send(MESSAGE.encode())
        assert trio.current_time() - started == pytest.approx(SEND_TIMEOUT_S + CLOSE_WAIT_S, abs=0.6)
        nursery.cancel_scope.cancel()
    await client.stream.aclose()
