"""[fleet]: what a copy of a session is told from other replicas (its client's notifications sent there)
waits for room in the copy's inbound queue at most MAX_TOLD_WAITING at a time; past that it is dropped, and
every waiting one ends with the copy. Memory channels and the real HTTP session transport, no Redis."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from actors.frontends.http.fleet_messages import MAX_TOLD_WAITING, told_here
from actors.frontends.http.transport import INBOUND_SIZE, HttpSessionTransport

CANCELLED = "notifications/cancelled"


def sessions_holding(entry: Any, nursery: trio.Nursery, *, owner: bool) -> Any:
    fleet = SimpleNamespace(opened_here=lambda session_id: owner)
    return SimpleNamespace(get={"s": entry}.get, fleet=fleet, nursery=nursery)


async def test_notifications_told_to_a_copy_that_reads_nothing_wait_up_to_a_cap_and_end_with_it() -> None:
    transport = HttpSessionTransport()
    entry = SimpleNamespace(transport=transport, label="http-1", told_waiting=0)
    for _ in range(INBOUND_SIZE):  # its reader is stuck: the queue is full
        await transport.deliver(b"{}")
    async with trio.open_nursery() as nursery:
        sessions = sessions_holding(entry, nursery, owner=True)
        for number in range(MAX_TOLD_WAITING + 5):
            told_here(sessions, "s", CANCELLED, {"requestId": number})
        await trio.testing.wait_all_tasks_blocked()
        assert entry.told_waiting == MAX_TOLD_WAITING  # the other five dropped, not waiting
        told_here(sessions, "unknown", CANCELLED, {"requestId": 1})  # no copy here: nothing
        await transport.aclose()  # the copy ends: what waited ends with it
    assert entry.told_waiting == 0


async def test_initialized_is_given_only_to_the_owners_copy() -> None:
    for owner, expected in ((True, 1), (False, 0)):
        transport = HttpSessionTransport()
        entry = SimpleNamespace(transport=transport, label="http-1", told_waiting=0)
        async with trio.open_nursery() as nursery:
            told_here(sessions_holding(entry, nursery, owner=owner), "s", "notifications/initialized", {})
        transport.end_input()
        given = []
        while (frame := await transport.receive()) is not None:
            given.append(frame)
        assert len(given) == expected
