"""The shared subscription table: who asks the backend, who waits for that answer, who unsubscribes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
import trio.testing

from actors.catalog.subscriptions import Subscriptions


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
