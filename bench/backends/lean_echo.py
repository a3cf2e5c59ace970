"""The leanest possible MCP backend over stdio: one tool, echo, answered from a precomputed template.

For scripts/bench, so that the gateway's own cost per call is visible instead of hidden behind a slow
backend. Reads one JSON-RPC message per line, writes one per line; exits at the end of stdin.
"""

from __future__ import annotations

import sys

import orjson

TOOLS = orjson.dumps(
    {
        "tools": [
            {
                "name": "echo",
                "description": "Answer with a fixed text (a benchmark backend).",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        ]
    }
)
CALL_RESULT = b',"result":{"content":[{"type":"text","text":"ok"}]}}\n'


def answer(request_id: object, result: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + b',"result":' + result + b"}\n"


def catalog(extra: int) -> bytes:
    """tools/list with echo and `extra` more tools (for the bench's big-catalog scenario)."""
    tools = orjson.loads(TOOLS)["tools"]
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    for n in range(extra):
        tools.append({"name": f"tool_{n}", "description": f"Extra tool number {n}.", "inputSchema": schema})
    return orjson.dumps({"tools": tools})


def main() -> int:
    """lean_echo.py [--tools N]: N more tools beside echo (each answers like echo)."""
    listing = catalog(int(sys.argv[2])) if sys.argv[1:2] == ["--tools"] else TOOLS
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = orjson.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "tools/call":
            out.write(b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + CALL_RESULT)
        elif method == "initialize":
            version = message["params"].get("protocolVersion", "2025-11-25")
            server = {"name": "lean-echo", "version": "1"}
            info = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": server}
            out.write(answer(request_id, orjson.dumps(info)))
        elif method == "tools/list":
            out.write(answer(request_id, listing))
        elif method == "ping":
            out.write(answer(request_id, b"{}"))
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
            out.write(body + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
