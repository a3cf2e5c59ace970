"""Two stand-ins for the gateway, for scripts/bench: what a stdio hop costs on Trio before any gateway logic.

    floor.py relay BACKEND_ARGV...   bytes copied both ways by two tasks, no parsing at all
    floor.py shape BACKEND_ARGV...   the gateway's actor shape (OTP reply-to) with nothing in it: a reader,
                                     a dispatcher that forwards each message to the backend actor and goes
                                     on (no task per request), the backend actor that gives a call its own
                                     id, notes it in the in-flight table and writes the frame, the backend's
                                     reader that maps the answer's id back and puts it straight on the
                                     session's outbox, a writer; one timer task sweeps the in-flight table
                                     for calls past their deadline; bounded memory channels between them.
                                     An actor waiting on an empty inbox has its work done by its sender,
                                     in the sender's task, as the gateway does (docs/architecture.md): the
                                     reader dispatches, the dispatcher writes the call, the backend's
                                     reader writes the answer, each whole and without waiting

Both start BACKEND_ARGV as their one backend and speak newline-delimited JSON-RPC on stdin/stdout, so the
bench drives them like the gateway. Neither checks, routes, names or supervises anything: the gap between
`relay` and `shape` is what the actor tree costs, the gap between `shape` and the gateway is the gateway's
own work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import count
from typing import Any, Final

import orjson
import trio

from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.runtime.channels import put, receiver_idle

MAX_LINE: Final = 1 << 22
TIMEOUT_S: Final = 60.0  # per call, as the gateway's default
SWEEP_S: Final = 1.0  # how often the timer task looks for calls past their deadline
INBOX_SIZE: Final = 16
QUEUE_SIZE: Final = 64  # the backend's inbox and the session's outbox


def _own_stdio() -> tuple[PipeStream, PipeStream]:
    return PipeStream(trio.lowlevel.FdStream(os.dup(0))), PipeStream(trio.lowlevel.FdStream(os.dup(1)))


async def relay(backend: list[str]) -> None:
    process = await trio.lowlevel.open_process(backend, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    client_in, client_out = _own_stdio()

    async def copy(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
        while data := await source.receive_some(1 << 16):
            await sink.send_all(data)
        await sink.aclose()  # the client is done: so is the backend, which ends the other way

    async with trio.open_nursery() as nursery:
        nursery.start_soon(copy, client_in, PipeStream(process.stdin))  # type: ignore[arg-type]
        nursery.start_soon(copy, PipeStream(process.stdout), client_out)  # type: ignore[arg-type]


async def _write_batches(outbox: trio.MemoryReceiveChannel[dict[str, Any]], stream: LineStream) -> None:
    """Everything queued goes out in one write, as the gateway's writer and backend actor do."""
    async for first in outbox:
        frames = [orjson.dumps(first)]
        while True:
            try:
                frames.append(orjson.dumps(outbox.receive_nowait()))
            except trio.WouldBlock:
                break
        await stream.send_many(frames)


async def shape(backend: list[str]) -> None:
    process = await trio.lowlevel.open_process(backend, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    client = LineStream(*_own_stdio(), MAX_LINE)
    link = LineStream(PipeStream(process.stdout), PipeStream(process.stdin), MAX_LINE)  # type: ignore[arg-type]
    to_dispatch, inbox = trio.open_memory_channel[dict[str, Any]](INBOX_SIZE)
    to_backend, calls = trio.open_memory_channel[dict[str, Any]](QUEUE_SIZE)
    to_writer, outbox = trio.open_memory_channel[dict[str, Any]](QUEUE_SIZE)
    in_flight: dict[int, tuple[Any, float]] = {}  # backend-side id -> (client's id, deadline), oldest first
    own_ids = count(1)

    def own(message: dict[str, Any], deadline: float) -> dict[str, Any]:
        if "id" in message and "method" in message:
            own_id = next(own_ids)
            in_flight[own_id] = (message["id"], deadline)
            message = {**message, "id": own_id}
        return message

    def call_now(message: dict[str, Any]) -> bool:
        """The backend actor's work, in the caller's task, while the actor waits on an empty inbox."""
        if not receiver_idle(calls) or "id" not in message or "method" not in message:
            return False
        own_id = next(own_ids)
        if not link.send_nowait((orjson.dumps({**message, "id": own_id}),)):
            return False
        in_flight[own_id] = (message["id"], trio.current_time() + TIMEOUT_S)
        return True

    async def reader() -> None:
        while (line := await client.receive()) is not None:
            message = orjson.loads(line)
            if not receiver_idle(inbox):  # the dispatcher is busy: it takes the message in its turn
                await put(to_dispatch, message)
            elif not call_now(message):  # else the dispatcher's work done here: forward
                await put(to_backend, message)
        nursery.cancel_scope.cancel()  # the client is done (answers still in flight are dropped)

    async def dispatcher() -> None:
        async for message in inbox:  # forward and go on: the answer does not come back this way
            await put(to_backend, message)

    async def backend_actor() -> None:
        async for first in calls:
            batch = [first]
            while True:
                try:
                    batch.append(calls.receive_nowait())
                except trio.WouldBlock:
                    break
            deadline = trio.current_time() + TIMEOUT_S
            await link.send_many([orjson.dumps(own(message, deadline)) for message in batch])

    async def backend_reader() -> None:
        while (line := await link.receive()) is not None:
            message = orjson.loads(line)
            entry = in_flight.pop(message["id"], None)
            if entry is not None:  # else swept already: answered once, by the timer
                message["id"] = entry[0]
                if not (receiver_idle(outbox) and client.send_nowait((orjson.dumps(message),))):
                    await put(to_writer, message)

    async def timer() -> None:
        while True:
            await trio.sleep(SWEEP_S)
            now = trio.current_time()
            expired = []
            for own_id, (_, deadline) in in_flight.items():
                if deadline > now:
                    break  # entries are in deadline order: one timeout for every call
                expired.append(own_id)
            for own_id in expired:
                client_id, _ = in_flight.pop(own_id)
                error = {"code": -32001, "message": "timed out"}
                await put(to_writer, {"jsonrpc": "2.0", "id": client_id, "error": error})

    async with trio.open_nursery() as nursery:
        for actor in (reader, dispatcher, backend_actor, backend_reader, timer):
            nursery.start_soon(actor)
        nursery.start_soon(_write_batches, outbox, client)


def main() -> None:
    mode, backend = sys.argv[1], sys.argv[2:]
    trio.run({"relay": relay, "shape": shape}[mode], backend)


if __name__ == "__main__":
    main()
