"""A naive stdio MCP gateway, for scripts/bench: the simplest correct one a Trio programmer would write first.

    naive_gateway.py BACKEND_ARGV...

It starts one backend, initializes it, then serves one client on stdin/stdout (newline-delimited JSON-RPC,
stdlib `json`). It answers `initialize` and `ping` itself; every other request gets a task of its own that
gives it a fresh backend id, writes it, waits on a trio.Event for the answer (or a timeout) and writes the
answer back under the client's id. Notifications, and cancellations with their id mapped, go to the backend;
the backend's notifications and requests go to the client unchanged (there is one client), and so do the
client's answers to them. When the backend exits, every call still waiting is answered with an error.

The bench measures it as a path of its own so its report can say: the gateway's CPU per call over this one's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import trio

TIMEOUT_S = 60.0
SERVER_INFO = {"name": "naive-gateway", "version": "0"}


class NaiveGateway:
    def __init__(self, backend: trio.Process) -> None:
        assert backend.stdin is not None and backend.stdout is not None
        self.backend = backend
        self.backend_in: trio.abc.SendStream = backend.stdin
        self.backend_out: trio.abc.ReceiveStream = backend.stdout
        self.client_in = trio.lowlevel.FdStream(os.dup(0))
        self.client_out = trio.lowlevel.FdStream(os.dup(1))
        self.client_lock = trio.Lock()
        self.backend_lock = trio.Lock()
        self.next_id = 0
        self.pending: dict[int, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self.backend_ids: dict[Any, int] = {}  # client's id -> backend's id, for cancellations
        self.initialized: dict[str, Any] = {}
        self.backend_gone = False

    async def to_client(self, message: dict[str, Any]) -> None:
        async with self.client_lock:
            await self.client_out.send_all(json.dumps(message).encode() + b"\n")

    async def to_backend(self, message: dict[str, Any]) -> None:
        async with self.backend_lock:
            await self.backend_in.send_all(json.dumps(message).encode() + b"\n")

    async def ask_backend(
        self, method: str, params: dict[str, Any] | None, client_id: Any = None
    ) -> dict[str, Any]:
        """Send a request to the backend and wait for its answer (a result or an error message)."""
        if self.backend_gone:
            return {"error": {"code": -32603, "message": "the backend exited"}}
        self.next_id += 1
        backend_id, done, answer = self.next_id, trio.Event(), []
        self.pending[backend_id] = (done, answer)
        if client_id is not None:
            self.backend_ids[client_id] = backend_id
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": backend_id, "method": method}
        if params is not None:
            request["params"] = params
        try:
            await self.to_backend(request)
            with trio.move_on_after(TIMEOUT_S):
                await done.wait()
        finally:
            self.pending.pop(backend_id, None)
            self.backend_ids.pop(client_id, None)
        if not answer:
            cancel = {"requestId": backend_id, "reason": "timed out"}
            await self.to_backend({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            return {"error": {"code": -32001, "message": f"{method}: no answer in {TIMEOUT_S:g}s"}}
        return answer[0]

    async def initialize_backend(self) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": SERVER_INFO,
        }
        answer = await self.ask_backend("initialize", params)
        if "result" not in answer:
            raise RuntimeError(f"the backend refused to initialize: {answer}")
        self.initialized = answer["result"]
        await self.to_backend({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def forward(self, request: dict[str, Any]) -> None:
        """One client request, in a task of its own: forwarded, awaited, answered under the client's id."""
        client_id = request["id"]
        answer = await self.ask_backend(request["method"], request.get("params"), client_id)
        reply = {"jsonrpc": "2.0", "id": client_id}
        reply.update({key: answer[key] for key in ("result", "error") if key in answer})
        await self.to_client(reply)

    async def serve_client(self, nursery: trio.Nursery) -> None:
        async for message in lines(self.client_in):
            if message is None:
                error = {"code": -32700, "message": "Parse error"}
                await self.to_client({"jsonrpc": "2.0", "id": None, "error": error})
            elif "method" not in message:
                await self.to_backend(message)  # the client's answer to a backend's request
            elif "id" not in message:
                await self.client_notification(message)
            elif message["method"] == "initialize":
                await self.to_client({"jsonrpc": "2.0", "id": message["id"], "result": self.welcome(message)})
            elif message["method"] == "ping":
                await self.to_client({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            else:
                nursery.start_soon(self.forward, message)
        nursery.cancel_scope.cancel()  # the client is gone

    def welcome(self, request: dict[str, Any]) -> dict[str, Any]:
        asked = request.get("params", {}).get("protocolVersion")
        version = self.initialized.get("protocolVersion", asked)
        return {
            "protocolVersion": version,
            "capabilities": self.initialized.get("capabilities", {}),
            "serverInfo": SERVER_INFO,
        }

    async def client_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method == "notifications/initialized":
            return  # the backend was initialized once, at start
        if method == "notifications/cancelled":
            params = dict(message.get("params", {}))
            backend_id = self.backend_ids.get(params.get("requestId"))
            if backend_id is None:
                return  # answered already
            params["requestId"] = backend_id
            message = {**message, "params": params}
        await self.to_backend(message)

    async def serve_backend(self) -> None:
        async for message in lines(self.backend_out):
            if message is None:
                continue
            if "method" in message:
                await self.to_client(message)  # a notification or a request of its own: one client, same ids
                continue
            entry = self.pending.get(message.get("id"))  # type: ignore[arg-type]
            if entry is not None:
                done, answer = entry
                answer.append(message)
                done.set()
        self.backend_gone = True
        for done, answer in self.pending.values():  # the backend is gone: nobody waits forever
            answer.append({"error": {"code": -32603, "message": "the backend exited"}})
            done.set()


async def lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[dict[str, Any] | None]:
    """Each line of `stream` parsed (None for one that is not a JSON object), until the stream ends."""
    buffer = b""
    while chunk := await stream.receive_some(65536):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                yield message if isinstance(message, dict) else None


async def main(backend_argv: list[str]) -> None:
    backend = await trio.lowlevel.open_process(backend_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    gateway = NaiveGateway(backend)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gateway.serve_backend)
            await gateway.initialize_backend()
            await gateway.serve_client(nursery)
    finally:
        with trio.CancelScope(shield=True):
            await gateway.backend_in.aclose()
            with trio.move_on_after(5):
                await backend.wait()
            if backend.returncode is None:
                backend.kill()


if __name__ == "__main__":
    trio.run(main, sys.argv[1:])
