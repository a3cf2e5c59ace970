"""Two stand-ins for the gateway, for scripts/bench: what a stdio hop costs on Trio before any gateway logic.

    bench_floor.py relay BACKEND_ARGV...   bytes copied both ways by two tasks, no parsing at all
    bench_floor.py shape BACKEND_ARGV...   the gateway's actor shape with nothing in it: a reader task, a
                                           dispatcher that starts a task per request (inside a cancel scope
                                           and a timeout, as the gateway's do), a backend actor, the
                                           backend's reader, a writer; bounded memory channels between them

Both start BACKEND_ARGV as their one backend and speak newline-delimited JSON-RPC on stdin/stdout, so the
bench drives them like the gateway. Neither checks, routes, names or supervises anything: the gap between
`relay` and `shape` is what the actor tree costs, the gap between `shape` and the gateway is the gateway's
own work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import orjson
import trio

from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.runtime.channels import put

MAX_LINE = 1 << 22
TIMEOUT_S = 60.0


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


async def shape(backend: list[str]) -> None:
    process = await trio.lowlevel.open_process(backend, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    client = LineStream(*_own_stdio(), MAX_LINE)
    link = LineStream(PipeStream(process.stdout), PipeStream(process.stdin), MAX_LINE)  # type: ignore[arg-type]
    to_dispatch, inbox = trio.open_memory_channel[dict[str, Any]](16)
    to_backend, calls = trio.open_memory_channel[dict[str, Any]](64)
    to_writer, outbox = trio.open_memory_channel[dict[str, Any]](64)
    waiting: dict[int, tuple[trio.Event, list[dict[str, Any]]]] = {}
    next_id = iter(range(1, 1 << 62))

    async def reader() -> None:
        while (line := await client.receive()) is not None:
            await put(to_dispatch, orjson.loads(line))
        nursery.cancel_scope.cancel()  # the client is done (answers still in flight are dropped)

    async def request(message: dict[str, Any]) -> None:
        own_id, done, answer = next(next_id), trio.Event(), []
        waiting[own_id] = (done, answer)
        with trio.CancelScope(), trio.move_on_after(TIMEOUT_S):
            await put(to_backend, {**message, "id": own_id})
            await done.wait()
        await put(to_writer, {**answer[0], "id": message["id"]})

    async def dispatcher(requests: trio.Nursery) -> None:
        async for message in inbox:
            if "id" in message and "method" in message:
                requests.start_soon(request, message)
            elif "method" in message:
                await put(to_backend, message)

    async def backend_actor() -> None:
        async for first in calls:
            frames = [orjson.dumps(first)]
            while True:
                try:
                    frames.append(orjson.dumps(calls.receive_nowait()))
                except trio.WouldBlock:
                    break
            await link.send_many(frames)

    async def backend_reader() -> None:
        while (line := await link.receive()) is not None:
            message = orjson.loads(line)
            done, answer = waiting.pop(message["id"])
            answer.append(message)
            done.set()

    async def writer() -> None:
        async for first in outbox:
            frames = [orjson.dumps(first)]
            while True:
                try:
                    frames.append(orjson.dumps(outbox.receive_nowait()))
                except trio.WouldBlock:
                    break
            await client.send_many(frames)

    async with trio.open_nursery() as nursery:
        for actor in (reader, backend_actor, backend_reader, writer):
            nursery.start_soon(actor)
        nursery.start_soon(dispatcher, nursery)


def main() -> None:
    mode, backend = sys.argv[1], sys.argv[2:]
    trio.run({"relay": relay, "shape": shape}[mode], backend)


if __name__ == "__main__":
    main()
