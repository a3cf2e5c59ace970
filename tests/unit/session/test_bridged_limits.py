"""The output limit through the era bridge: a legacy backend's answer to a modern client's call that waits
parked between rounds is held, and handed to the retry, already cut (the Call's shape is applied where the
answer arrives, before the bridged call parks it)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from actors.catalog import BackendState, BackendStatus
from actors.output.limits import limited_result
from actors.protocol.envelopes import Ask, BackendCommand, Call, Reply, ReplySlot, answer
from actors.session.bridge import BridgedCall
from actors.session.parked import Bridges

PARAMS = {"name": "dump", "arguments": {}}
FORM = {"message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}
MB5 = 5 * 1024 * 1024


async def test_a_parked_answer_is_held_and_handed_on_cut(autojump_clock: trio.testing.MockClock) -> None:
    calls, _ = trio.open_memory_channel[BackendCommand](8)
    backend = BackendStatus(name="b", state=BackendState.READY, request_timeout_s=30.0, calls=calls)
    async with trio.open_nursery() as nursery:
        table = Bridges(nursery=nursery)
        first = ReplySlot()
        bridged = table.open(
            method="tools/call", params=PARAMS, principal=None, capabilities={"elicitation": {}},
            responses={}, target=first,
        )  # fmt: skip
        assert isinstance(bridged, BridgedCall)
        bridged.backend, bridged.call_id = backend, 7

        def shape(result: dict[str, Any], raw_size: int | None) -> dict[str, Any]:
            return limited_result(result, 2000, "dump")

        call = Call(7, "tools/call", PARAMS, "s", bridged, shape=shape)  # type: ignore[arg-type]
        bridged.send_nowait(Ask(1, "b", "elicitation/create", FORM, ReplySlot(), "k"))
        state = (await first.wait()).result["requestState"]  # the client is asked; the call parks
        answer(call, Reply(result={"content": [{"type": "text", "text": "x" * MB5}]}, raw=b"..."))
        assert bridged.answered is not None
        assert len(bridged.answered.result["content"][0]["text"]) == 2000  # held cut, not 5 MB
        retry = ReplySlot()
        resumed = table.resume(
            method="tools/call", params=PARAMS, state=state, principal=None,
            capabilities={"elicitation": {}}, responses={}, target=retry,
        )  # fmt: skip
        assert resumed is bridged
        got = await retry.wait()
        assert len(got.result["content"][0]["text"]) == 2000 and got.raw is None
        nursery.cancel_scope.cancel()
