"""A tools/call's shape is applied once, where its backend's answer arrives (protocol/envelopes.py
`answer`): an answer it leaves alone keeps the backend's raw bytes, one it changes loses them, and an error
is never shaped."""

from __future__ import annotations

from typing import Any

from actors.output.limits import limited_result
from actors.protocol.envelopes import Call, Reply, ReplySlot, answer
from actors.protocol.messages import RpcError


def call_with_limit(limit: int) -> tuple[Call, ReplySlot, list[dict[str, Any]]]:
    slot, seen = ReplySlot(), []

    def shape(result: dict[str, Any], raw_size: int | None) -> dict[str, Any]:
        seen.append(result)
        return limited_result(result, limit, "dump")

    return Call(1, "tools/call", {"name": "dump"}, "s", slot, shape=shape), slot, seen


async def test_a_result_within_the_limit_keeps_its_raw_bytes() -> None:
    call, slot, _ = call_with_limit(1000)
    reply = Reply(result={"content": [{"type": "text", "text": "short"}]}, raw=b"{...}")
    answer(call, reply)
    assert await slot.wait() is reply


async def test_a_cut_result_goes_on_without_the_backends_bytes() -> None:
    call, slot, seen = call_with_limit(1000)
    answer(call, Reply(result={"content": [{"type": "text", "text": "x" * 50_000}]}, raw=b"{...}"))
    got = await slot.wait()
    assert got.raw is None and len(got.result["content"][0]["text"]) == 1000
    assert len(seen) == 1  # once


async def test_an_error_or_a_result_that_is_no_object_is_not_shaped() -> None:
    for reply in (Reply(error=RpcError(-32603, "boom")), Reply(result=["not", "an", "object"])):
        call, slot, seen = call_with_limit(1000)
        answer(call, reply)
        assert await slot.wait() is reply and not seen
