"""What one client and one session may hold in the gateway's table of parked calls, what happens when the
table is full, and what a parked call keeps of its client's answers (raw bytes, counted in its budget)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson
import pytest
import trio.testing
from test_bridge import BACKEND, OPEN, bridges, input_required, resume

from actors.protocol.envelopes import Ask, Cancel, ReplySlot
from actors.protocol.messages import RpcError
from actors.session.bridge import MAX_INPUT_RESPONSES, BridgedCall, held_bytes
from actors.session.parked import MAX_PARKED, MAX_PARKED_PER_CLIENT, MAX_PARKED_PER_SESSION, Bridges

ANSWERS = {"later": {"action": "accept", "content": {"text": "x" * 1000}}}


def open_as(table: Bridges, *, principal: str | None = None, session: str = "s", **changes: Any) -> Any:
    return table.open(**{**OPEN, "principal": principal, "target": ReplySlot(), **changes}, session=session)


def test_caps_sit_below_the_global_one() -> None:
    assert MAX_PARKED_PER_SESSION < MAX_PARKED_PER_CLIENT < MAX_PARKED


async def test_a_client_on_many_sessions_gets_its_share_and_one_past_it_is_refused(
    autojump_clock: Any,
) -> None:
    async with bridges() as (table, _):
        kept = [
            open_as(table, principal="alice", session=f"post-{n // MAX_PARKED_PER_SESSION}-{n}")
            for n in range(MAX_PARKED_PER_CLIENT)
        ]
        assert all(isinstance(call, BridgedCall) for call in kept)  # at the bound: every one taken
        refused = open_as(table, principal="alice", session="one-more-post")
        assert isinstance(refused, RpcError) and refused.code == -32000
        assert refused.data == {"budget": "MAX_PARKED_PER_CLIENT", "limit": 256, "used": 256}
        assert isinstance(open_as(table, principal="bob"), BridgedCall)  # someone else is served


async def test_a_full_table_drops_the_oldest_call_of_the_client_holding_the_most(
    autojump_clock: Any,
) -> None:
    async with bridges() as (table, commands):
        holders = {"big": MAX_PARKED_PER_CLIENT, "mid": MAX_PARKED_PER_CLIENT - 1}
        rest = MAX_PARKED - sum(holders.values())
        calls: dict[str, list[BridgedCall]] = {}
        for name, count in holders.items():
            calls[name] = [
                open_as(table, principal=name, session=f"{name}-{n // MAX_PARKED_PER_SESSION}")
                for n in range(count)
            ]
        for n in range(rest):
            open_as(table, principal=f"small-{n % 8}", session=f"small-{n}")
        assert len(table.calls) == MAX_PARKED
        oldest = calls["big"][0]
        oldest.backend, oldest.call_id = BACKEND["b"], 41
        oldest_waits, next_waits = oldest.target, calls["big"][1].target
        assert isinstance(oldest_waits, ReplySlot) and isinstance(next_waits, ReplySlot)
        newcomer = open_as(table, principal="newcomer")
        assert isinstance(newcomer, BridgedCall) and len(table.calls) == MAX_PARKED
        assert oldest.closed and oldest.handle not in table.calls and not calls["big"][1].closed
        assert table.opened_by["principal:big"] == MAX_PARKED_PER_CLIENT - 1
        cancel = commands.receive_nowait()  # its backend stops working on it
        assert isinstance(cancel, Cancel) and cancel.call_id == 41
        error = (await oldest_waits.wait()).error  # its request waiting gets the error naming the cap
        assert error is not None and error.data["budget"] == "MAX_PARKED" and not next_waits.filled


async def test_a_dropped_parked_call_retried_starts_over(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        parked = table.open(**{**OPEN, "target": first, "capabilities": {"elicitation": {}}}, session="a")
        assert isinstance(parked, BridgedCall)
        parked.send_nowait(Ask(1, "b", "elicitation/create", {"message": "?"}, ReplySlot(), "k"))
        state = (await input_required(first))["requestState"]
        table._drop_oldest_of_biggest()
        retried = resume(table, state, {"k": {"action": "accept"}}, ReplySlot())
        assert isinstance(retried, RpcError) and retried.code == -32602  # the spec's: start the request over


async def test_a_parked_call_keeps_its_answers_raw_and_counts_them_until_it_ends(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        call = open_as(table, responses=ANSWERS, capabilities={"elicitation": {}})
        assert isinstance(call, BridgedCall)
        assert call.kept == {"later": orjson.dumps(ANSWERS["later"])}  # bytes, not a decoded tree
        assert table.budget.used == {"session:s": held_bytes(call.kept)} and call.kept_bytes > 1000
        early = Ask(2, "b", "elicitation/create", {"message": "?"}, ReplySlot(), "later")
        call.send_nowait(early)  # asked after it was answered: the raw answer, decoded now
        assert early.reply_to.filled and (await early.reply_to.wait()).result == ANSWERS["later"]
        call.close("done")
        await trio.testing.wait_all_tasks_blocked()
        assert table.budget.used == {}


async def test_a_parked_call_that_expires_gives_its_kept_answers_back(autojump_clock: Any) -> None:
    async with bridges() as (table, _):
        first = ReplySlot()
        call = open_as(table, responses=ANSWERS, capabilities={"elicitation": {}}, target=first)
        assert isinstance(call, BridgedCall) and table.budget.used
        call.send_nowait(Ask(3, "b", "elicitation/create", {"message": "?"}, ReplySlot(), "other"))
        await input_required(first)  # parked now, waiting for a retry that never comes
        await trio.sleep(table.ttl_s + 1)
        assert call.closed and table.calls == {} and table.budget.used == {}


@pytest.mark.parametrize(
    "value",
    [{}, {"action": "accept"}, {"text": "x" * 5000}, {"text": "y" * 100_000}],
    ids=["empty", "small", "5 kB", "100 kB"],
)
async def test_what_a_parked_call_keeps_is_counted_at_no_less_than_it_holds_and_freed_at_its_end(
    autojump_clock: Any, value: dict[str, Any]
) -> None:
    """orjson hands back its write buffer unshrunk (4 KiB for `{}`, ~10x the text past that): kept as it
    came, 278k empty answers held 1.2 GB and were counted as 4 MB. Measured here with tracemalloc."""
    answers = {f"key-{n}": value for n in range(MAX_INPUT_RESPONSES)}
    async with bridges() as (table, _):
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            call = open_as(table, responses=answers, capabilities={"elicitation": {}})
            assert isinstance(call, BridgedCall)
            held = tracemalloc.get_traced_memory()[0] - before
            assert held <= call.kept_bytes <= 2 * held + 4096  # counted at what it holds (the call itself
            assert table.budget.used == {"session:s": call.kept_bytes}  # and its timers aside)
            call.close("done")
            await trio.testing.wait_all_tasks_blocked()
            del call
            assert tracemalloc.get_traced_memory()[0] - before < 4096  # given back whole
        finally:
            tracemalloc.stop()
        assert table.budget.used == {} and table.calls == {}
