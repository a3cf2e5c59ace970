"""A 2026-07-28 client's inputResponses through a real gateway (in this process) over a real WebSocket, to a
real legacy backend that asks the client (the era bridge parks the call): entries past MAX_INPUT_RESPONSES
are refused with -32602 naming the cap; what a parked call keeps is counted at what it holds in memory, and
freed when the call ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from support import backend_entry, connect, running, with_websocket, write_config

from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY
from actors.session.bridge import MAX_INPUT_RESPONSES

META: Final = {
    PROTOCOL_VERSION_KEY: "2026-07-28",
    CLIENT_CAPABILITIES_KEY: {"sampling": {}},
    CLIENT_INFO_KEY: {"name": "many-answers", "version": "1"},
}
SAMPLING: Final = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
CALL: Final = {"name": "ask_client", "arguments": SAMPLING}


def call(**extra: Any) -> dict[str, Any]:
    return {**CALL, **extra, "_meta": META}


async def test_input_responses_are_capped_counted_as_held_and_freed_with_their_call(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=ask_client")]))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with connect(gateway.websocket_url, initialize=False) as client:
            too_many = {f"k{n}": {} for n in range(MAX_INPUT_RESPONSES + 1)}
            await client.request(1, "tools/call", call(inputResponses=too_many))
            error = (await client.answer_to(1))["error"]
            assert error["code"] == -32602 and "MAX_INPUT_RESPONSES" in error["message"]
            assert error["data"] == {"field": "inputResponses", "limit": MAX_INPUT_RESPONSES}
            assert gateway.bridges.calls == {}  # refused before anything was parked or asked

            at_cap = {f"k{n}": {} for n in range(MAX_INPUT_RESPONSES)}
            await client.request(2, "tools/call", call(inputResponses=at_cap))
            first = (await client.answer_to(2))["result"]
            assert first["resultType"] == "input_required"
            ((parked,),) = [list(gateway.bridges.calls.values())]
            # Each entry holds a key and a value object (~85 bytes here, whatever their text) and its slot;
            # counted as 6 bytes of text each, 256 entries passed for 1.5 kB
            assert parked.kept_bytes >= MAX_INPUT_RESPONSES * 80
            assert gateway.bridges.budget.used[parked.client] >= parked.kept_bytes

            ((key, _),) = first["inputRequests"].items()
            sampled = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
            retry = call(inputResponses={key: sampled}, requestState=first["requestState"])
            await client.request(3, "tools/call", retry)
            assert (await client.answer_to(3))["result"]["resultType"] == "complete"
            assert gateway.bridges.calls == {} and gateway.bridges.budget.used == {}  # all of it given back
