"""The probe's load of issue #25, against a real gateway on loopback, and the gateway's memory under it.

One client parks 60 calls (a modern tools/call on a legacy backend that asks for the user's name), each
retried with ~4 MB of inputResponses that answer nothing, so the call stays parked with them; another
client sends 256 tools/call of ~4 MB arguments to a tool that sleeps. The budgets ([gateway]
max_request_bytes and max_client_bytes, defaults unless given) take what they allow and refuse the rest.
Prints how many were taken and refused, and the gateway's RSS (now and peak) before and under the load.

    .venv/bin/python bench/budget_load.py [--max-client-bytes N] [--max-request-bytes N]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Final

import orjson
import trio
from proctools import peak_rss_mib, rss_kib, terminate
from trio_websocket import WebSocketConnection, open_websocket_url

ROOT: Final = Path(__file__).resolve().parent.parent
TEST_BACKEND: Final = ROOT / "tests" / "backends" / "testbackend.py"
PARKED: Final = 60
IN_FLIGHT: Final = 256
PAD_BYTES: Final = 4_000_000  # under the listener's 4 MiB frame limit, with the envelope
DEADLINE_S: Final = 120.0
LAST_ID: Final = 9999
HELLO_ID: Final = 9998  # a first small call: the connection speaks MCP at once
META: Final = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "budget-load", "version": "1"},
}


def pad() -> bytes:
    """~4 MB of short strings: ordinary JSON that decodes to about 12 times its size."""
    count = PAD_BYTES // 5
    return b"[" + b",".join(itertools.repeat(b'"ab"', count)) + b"]"


def frame(request_id: int, arguments: dict[str, Any], extra: bytes = b"") -> bytes:
    """A modern tools/call; `extra` (raw JSON members) goes into params as is, so the big part is not
    encoded again per frame."""
    params = orjson.dumps({**arguments, "_meta": META})
    if extra:
        params = params[:-1] + b"," + extra + b"}"
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (request_id, params)


def text(frame: bytes) -> str:
    return frame.decode()  # MCP over WebSocket: text frames


def connect(url: str) -> Any:
    return open_websocket_url(url, subprotocols=["mcp"], max_message_size=8 << 20)


async def answers(ws: WebSocketConnection, count: int) -> dict[int, dict[str, Any]]:
    got: dict[int, dict[str, Any]] = {}
    while len(got) < count:
        message = orjson.loads(await ws.get_message())
        if "id" in message:
            got[message["id"]] = message
    return got


def outcome(message: dict[str, Any]) -> str:
    if "error" in message:
        data = message["error"].get("data") or {}
        return f"refused ({data.get('budget', message['error']['message'])})"
    return str(message["result"].get("resultType", "complete"))


async def park(ws: WebSocketConnection, big: bytes) -> Counter[str]:
    """60 calls parked, each retried with ~4 MB of inputResponses that answer none of its asks."""
    for n in range(PARKED):
        await ws.send_message(text(frame(n, {"name": "ask_name", "arguments": {}})))
    first = await answers(ws, PARKED)
    refused = Counter(outcome(m) for m in first.values() if "result" not in m)
    for n, message in first.items():
        if "result" not in message:
            continue  # refused at its first round already
        state = orjson.dumps(message["result"]["requestState"])
        extra = b'"requestState":%s,"inputResponses":{"unasked":%s}' % (state, big)
        await ws.send_message(text(frame(1000 + n, {"name": "ask_name", "arguments": {}}, extra)))
    retried = await answers(ws, PARKED - refused.total())
    return refused + Counter(outcome(m) for m in retried.values())


async def hold(ws: WebSocketConnection, big: bytes) -> Counter[str]:
    """256 calls of ~4 MB arguments in flight on a tool that sleeps; the taken ones never answer. Answers
    are read as the calls go out (a client that reads nothing is held back, as it should be)."""
    outcomes: Counter[str] = Counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_held, ws, big)
        while True:  # requests are taken in order: the last one's answer means every other one is in
            message = orjson.loads(await ws.get_message())
            if message.get("id") == LAST_ID:
                outcomes["held in flight"] = IN_FLIGHT - sum(outcomes.values())
                return outcomes
            if message.get("id") not in (None, HELLO_ID):
                outcomes[outcome(message)] += 1
    raise AssertionError("unreachable")


async def _send_held(ws: WebSocketConnection, big: bytes) -> None:
    await ws.send_message(text(frame(HELLO_ID, {"name": "echo", "arguments": {"text": "hello"}})))
    for n in range(IN_FLIGHT):
        await ws.send_message(
            text(frame(n, {"name": "sleep", "arguments": {"seconds": 600}}, b'"pad":' + big))
        )
    await ws.send_message(text(frame(LAST_ID, {"name": "echo", "arguments": {"text": "last"}})))


async def gateway_url(process: trio.Process) -> str:
    assert process.stderr is not None
    seen = b""
    while b"listening on ws://" not in seen or not seen.endswith(b"\n"):
        chunk = await process.stderr.receive_some(65536)
        if not chunk:
            raise SystemExit(f"the gateway exited: {seen.decode(errors='replace')}")
        seen += chunk
    line = next(line for line in seen.decode().splitlines() if "listening on ws://" in line)
    return line[line.index("ws://") :].split()[0]


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="budget-load-"))
    config = folder / "g.toml"
    budgets = "".join(
        f"{key} = {value}\n"
        for key, value in (
            ("max_request_bytes", args.max_request_bytes),
            ("max_client_bytes", args.max_client_bytes),
        )
        if value is not None
    )
    backend = f'"{TEST_BACKEND}", "--only=ask_name,sleep,echo"'
    config.write_text(
        f'[gateway]\n{budgets}[[backends]]\nname = "alpha"\ncommand = "{sys.executable}"\n'
        f'args = [{backend}]\nera = "legacy"\n[websocket]\nhost = "127.0.0.1"\nport = 0\n'
    )
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config)]
    async with trio.open_nursery() as nursery:
        serve = partial(trio.run_process, argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        process: trio.Process = await nursery.start(serve)
        with trio.fail_after(DEADLINE_S):
            url = await gateway_url(process)
        nursery.start_soon(_drain, process, folder / "gateway.log")
        idle = rss_kib(process.pid) / 1024
        big = pad()
        with trio.fail_after(DEADLINE_S):
            async with connect(url) as parking, connect(url) as holding:
                parked = await park(parking, big)
                held = await hold(holding, big)
                loaded, peak = rss_kib(process.pid) / 1024, peak_rss_mib(process.pid)
        print(f"config: {budgets.strip() or 'default budgets'}")
        print(f"parked calls ({PARKED}, ~4 MB inputResponses each): {dict(parked)}")
        print(f"in-flight calls ({IN_FLIGHT}, ~4 MB arguments each): {dict(held)}")
        print(f"gateway RSS: idle {idle:.0f} MiB, under load {loaded:.0f} MiB, peak {peak:.0f} MiB")
        await terminate(process, 5.0)
        nursery.cancel_scope.cancel()


async def _drain(process: trio.Process, log: Path) -> None:
    assert process.stderr is not None
    with log.open("ab") as sink:
        while chunk := await process.stderr.receive_some(65536):
            sink.write(chunk)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-request-bytes", type=int)
    parser.add_argument("--max-client-bytes", type=int)
    trio.run(main, parser.parse_args())
