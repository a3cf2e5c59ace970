"""The shared subscription table: who asks the backend, who waits for that answer, who unsubscribes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio
import trio.testing

from actors.catalog import BackendState, BackendStatus, CatalogView
from actors.catalog.subscriptions import RELEASE_SEND_S, Subscriptions, unsubscribe_at
from actors.protocol.envelopes import BackendCommand, Call, ReplySlot
from actors.runtime.watch import Watch


class FakeBackend:
    """Answers subscribes when told to; counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0
        self.answers: trio.MemorySendChannel[str]
        self.answers, self._pending = trio.open_memory_channel[str](10)

    async def ask(self) -> str:
        self.asked += 1
        return await self._pending.receive()


def ok(answer: str) -> bool:
    return answer == "ok"


def subscriber(
    table: Subscriptions, backend: FakeBackend, results: dict[str, str | None]
) -> Callable[[str], Awaitable[None]]:
    """A task body subscribing one session to ("b", "u") and keeping what it was answered."""

    async def subscribe(session: str) -> None:
        results[session] = await table.subscribe("b", "u", session, backend.ask, ok)

    return subscribe


async def one_after_the_other(
    nursery: trio.Nursery, task: Callable[[str], Awaitable[None]], *names: str
) -> None:
    """Start `task` for each name, each once the ones before it are waiting."""
    for name in names:
        nursery.start_soon(task, name)
        await trio.testing.wait_all_tasks_blocked()


async def test_a_session_joining_during_the_first_subscribe_waits_for_its_answer() -> None:
    table, backend = Subscriptions(), FakeBackend()
    results: dict[str, str | None] = {}
    subscribe = subscriber(table, backend, results)

    async with trio.open_nursery() as nursery:
        await one_after_the_other(nursery, subscribe, "s1", "s2")
        assert results == {}  # s2 is not told "subscribed" before the backend has said so
        await backend.answers.send("ok")
    assert results == {"s1": "ok", "s2": None} and backend.asked == 1
    assert table.uris_of("b") == ["u"]


async def test_after_a_refusal_the_next_session_asks_for_itself() -> None:
    table, backend = Subscriptions(), FakeBackend()
    results: dict[str, str | None] = {}
    subscribe = subscriber(table, backend, results)

    async with trio.open_nursery() as nursery:
        await one_after_the_other(nursery, subscribe, "s1", "s2")
        await backend.answers.send("no")
        await trio.testing.wait_all_tasks_blocked()
        assert results == {"s1": "no"} and backend.asked == 2
        await backend.answers.send("ok")
    assert results == {"s1": "no", "s2": "ok"}
    assert not table.remove("b", "u", "s1")  # the refused session holds no interest
    assert table.remove("b", "u", "s2")  # the last one out: the gateway unsubscribes


async def test_a_cancelled_first_subscribe_hands_over_to_the_next_session() -> None:
    table, backend = Subscriptions(), FakeBackend()
    results: dict[str, str | None] = {}

    async with trio.open_nursery() as nursery:
        first = trio.CancelScope()

        async def subscribe_first() -> None:
            with first:
                await table.subscribe("b", "u", "s1", backend.ask, ok)

        async def subscribe_second() -> None:
            results["s2"] = await table.subscribe("b", "u", "s2", backend.ask, ok)

        nursery.start_soon(subscribe_first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(subscribe_second)
        await trio.testing.wait_all_tasks_blocked()
        first.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert backend.asked == 2
        await backend.answers.send("ok")
    assert results == {"s2": "ok"}
    assert table.drop_session("s1") == [] and table.drop_session("s2") == [("b", "u")]


async def test_only_confirmed_subscriptions_are_renewed_or_released() -> None:
    table, backend = Subscriptions(), FakeBackend()
    await backend.answers.send("no")
    assert await table.subscribe("b", "refused", "s1", backend.ask, ok) == "no"
    await backend.answers.send("ok")
    assert await table.subscribe("b", "taken", "s1", backend.ask, ok) == "ok"
    assert await table.subscribe("b", "taken", "s2", backend.ask, ok) is None  # joined, not asked
    assert table.uris_of("b") == ["taken"] and backend.asked == 2
    assert not table.remove("b", "taken", "s1")
    assert table.drop_session("s2") == [("b", "taken")]


def view_with(backend: str, calls: trio.MemorySendChannel[BackendCommand]) -> CatalogView:
    status = BackendStatus(name=backend, state=BackendState.READY, request_timeout_s=30.0, calls=calls)
    return CatalogView(backends={backend: status})


async def confirmed(table: Subscriptions, holder: str, *uris: str) -> None:
    async def yes() -> str:
        return "ok"

    for uri in uris:
        await table.subscribe("b", uri, holder, yes, ok)


async def test_an_ended_holder_costs_only_what_it_held_and_leaves_nothing_behind() -> None:
    table = Subscriptions()
    await confirmed(table, "s1", "u1", "u2")
    await confirmed(table, "s2", "u2")
    assert table.held_by("s1") == 2 and table.held_by("s2") == 1
    assert sorted(table.drop_session("s1")) == [("b", "u1")]  # u2 is still s2's
    assert table.held_by("s1") == 0 and table.uris_of("b") == ["u2"]
    assert table.drop_session("s2") == [("b", "u2")]
    assert table._interests == {} and table._held == {}


async def test_an_unsubscribe_for_a_full_inbox_is_queued_and_sent_once_there_is_room(
    autojump_clock: trio.testing.MockClock,
) -> None:
    table = Subscriptions()
    calls, inbox = trio.open_memory_channel[BackendCommand](1)
    view = view_with("b", calls)
    watch = Watch(view)
    await confirmed(table, "s1", "u1", "u2")
    calls.send_nowait(Call(1, "tools/call", {}, "s9", ReplySlot()))  # the backend is busy: its inbox is full
    table.release("s1", view)
    assert inbox.statistics().current_buffer_used == 1  # neither unsubscribe fitted; none was dropped
    async with trio.open_nursery() as nursery:
        nursery.start_soon(table.send_released, partial(unsubscribe_at, watch))
        await trio.sleep(RELEASE_SEND_S * 3)  # still full: retried, not given up
        sent = [await inbox.receive() for _ in range(3)]
        nursery.cancel_scope.cancel()
    unsubscribed = sorted(c.params["uri"] for c in sent[1:])  # type: ignore[union-attr,index]
    assert {c.method for c in sent[1:]} == {"resources/unsubscribe"} and unsubscribed == ["u1", "u2"]  # type: ignore[union-attr]


async def test_a_key_wanted_again_before_its_queued_unsubscribe_keeps_its_subscription() -> None:
    table = Subscriptions()
    calls, _inbox = trio.open_memory_channel[BackendCommand](0)  # never room
    view = view_with("b", calls)
    await confirmed(table, "s1", "u1")
    table.release("s1", view)
    assert list(table._released) == [("b", "u1")]  # queued: the backend had no room
    await confirmed(table, "s2", "u1")
    assert table._released == {}  # nothing left to unsubscribe
