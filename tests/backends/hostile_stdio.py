"""A hostile stdio MCP server for the sandbox tests: each tool tries something a sandbox must stop, and says
what happened as text, "done: ..." or "refused: ...". Standard library only, so any python3 (the system's,
under another uid) runs it.

    python3 tests/backends/hostile_stdio.py [TAG]   (TAG: ignored; lets a test find its processes)

Tools: echo(text); read_file(path); write_file(path); connect(port) to 127.0.0.1; fork_many(count);
allocate(mb); environment() (the names of its variables and of its parent's, from /proc); hold(seconds)
keeps a grandchild (in a session of its own) alive that long.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

TOOLS = ("echo", "read_file", "write_file", "connect", "fork_many", "allocate", "environment", "hold")


def read_file(args: dict[str, Any]) -> str:
    with open(args["path"]) as file:
        return file.read(200)


def write_file(args: dict[str, Any]) -> str:
    with open(args["path"], "w") as file:
        file.write("written by hostile_stdio\n")
    return args["path"]


def connect(args: dict[str, Any]) -> str:
    with socket.create_connection(("127.0.0.1", int(args["port"])), timeout=2) as conn:
        return f"connected to {conn.getpeername()}"


def fork_many(args: dict[str, Any]) -> str:
    children = []
    try:
        for _ in range(int(args.get("count", 200))):
            pid = os.fork()
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            children.append(pid)
        return f"{len(children)} children"
    finally:
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


def allocate(args: dict[str, Any]) -> str:
    block = bytearray(int(args.get("mb", 1024)) << 20)
    return f"{len(block) >> 20} MiB"


def parent_environment() -> str:
    """The names in its parent's environment (the gateway's, unsandboxed: its secrets with them)."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as file:
            entries = file.read().split(b"\0")
    except OSError as exc:
        return f"refused: {exc}"
    return " ".join(sorted(entry.split(b"=", 1)[0].decode() for entry in entries if entry))


def hold(args: dict[str, Any]) -> str:
    pid = os.fork()
    if pid == 0:
        os.setsid()  # a grandchild that left the group: the gateway's stop must still end it
        time.sleep(float(args.get("seconds", 60)))
        os._exit(0)
    return str(pid)


RUN: dict[str, Callable[[dict[str, Any]], str]] = {
    "echo": lambda args: str(args.get("text", "")),
    "read_file": read_file,
    "write_file": write_file,
    "connect": connect,
    "fork_many": fork_many,
    "allocate": allocate,
    "environment": lambda _args: " ".join(sorted(os.environ)) + " | parent: " + parent_environment(),
    "hold": hold,
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        result: Any = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        schema = {"type": "object"}
        result = {"tools": [{"name": name, "inputSchema": schema} for name in TOOLS]}
    elif method == "tools/call":
        try:
            text = "done: " + RUN[params["name"]](params.get("arguments") or {})
        except (OSError, MemoryError, ValueError) as exc:
            text = f"refused: {type(exc).__name__}: {exc}"
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    elif "id" in request:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such method"}}
    else:
        return None
    return {"jsonrpc": "2.0", "id": request["id"], "result": result} if "id" in request else None


def main() -> None:
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line))
        except (ValueError, KeyError, AttributeError):
            continue
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
