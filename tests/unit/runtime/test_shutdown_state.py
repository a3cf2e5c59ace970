"""The shutdown state: begun once, hurried step by step, its phases ended by their deadline or by urgency.
Virtual time only; the signals test sends real signals to this process, with the watcher installed."""

from __future__ import annotations

import os
import signal

import pytest
import trio
import trio.testing

from actors.runtime.shutdown import Budget, Shutdown, Urgency
from actors.runtime.signals import heard, watch_signals


def test_a_budget_splits_its_whole_length_into_the_phases() -> None:
    budget = Budget.of(1.25)
    assert budget.total_s == pytest.approx(1.25)
    assert min(budget.drain_s, budget.polite_s, budget.term_s, budget.kill_s) > 0


def test_the_shutdown_begins_once_and_keeps_its_first_budget() -> None:
    shutdown = Shutdown()
    assert not shutdown.begun and shutdown.budget_or(Budget.of(5)) == Budget.of(5)
    assert shutdown.begin("the stdio client is gone", Budget.of(1))
    assert not shutdown.begin("SIGTERM", Budget.of(5))
    assert shutdown.budget == Budget.of(1) and shutdown.reason == "the stdio client is gone"
    assert shutdown.urgency is Urgency.POLITE


async def test_a_phase_ends_at_its_deadline(autojump_clock: trio.testing.MockClock) -> None:
    shutdown = Shutdown()
    with shutdown.phase(2.0, until=Urgency.HURRIED) as scope:
        await trio.sleep_forever()
    assert scope.cancelled_caught and trio.current_time() == pytest.approx(2.0)
    assert shutdown._phases == []  # freed with its phase


async def test_hurrying_ends_the_polite_phase_and_forcing_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shutdown = Shutdown()
    shutdown.begin("SIGTERM", Budget.of(100))
    ended: list[tuple[str, float]] = []

    async def wait_out(name: str, until: Urgency) -> None:
        with shutdown.phase(60.0, until=until):
            await trio.sleep_forever()
        ended.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_out, "polite", Urgency.HURRIED)
        nursery.start_soon(wait_out, "term", Urgency.FORCED)
        await trio.sleep(1.0)
        assert shutdown.hurry() is Urgency.HURRIED
        await trio.testing.wait_all_tasks_blocked()
        assert ended == [("polite", 1.0)]
        await trio.sleep(1.0)
        assert shutdown.hurry() is Urgency.FORCED
    assert ended == [("polite", 1.0), ("term", 2.0)]
    assert shutdown.hurry() is Urgency.FORCED  # no further
    assert shutdown._phases == []


async def test_a_phase_entered_once_hurried_past_it_ends_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    shutdown = Shutdown()
    shutdown.begin("SIGINT", Budget.of(100))
    shutdown.hurry()
    with shutdown.phase(60.0, until=Urgency.HURRIED):
        await trio.sleep_forever()
    assert trio.current_time() == 0.0


def test_signals_begin_then_hurry_then_force_and_sighup_reloads_only_while_running() -> None:
    shutdown, reloads = Shutdown(), []
    heard(signal.SIGHUP, shutdown, 5.0, lambda: reloads.append(1))
    assert reloads == [1] and not shutdown.begun
    heard(signal.SIGTERM, shutdown, 5.0, lambda: reloads.append(1))
    assert shutdown.urgency is Urgency.POLITE and shutdown.budget == Budget.of(5.0)
    heard(signal.SIGHUP, shutdown, 5.0, lambda: reloads.append(1))
    assert reloads == [1]  # no reload during the shutdown
    heard(signal.SIGINT, shutdown, 5.0, lambda: reloads.append(1))
    assert shutdown.urgency is Urgency.HURRIED
    heard(signal.SIGTERM, shutdown, 5.0, lambda: reloads.append(1))
    assert shutdown.urgency is Urgency.FORCED


async def test_signals_are_heard_while_the_nursery_that_started_the_watcher_is_cancelled() -> None:
    """The root's cancellation does not end the watcher: a SIGTERM then still hurries the shutdown rather
    than killing the process by its default action."""
    shutdown = Shutdown()
    shutdown.begin("the stdio client is gone", Budget.of(1.0))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            watcher = await nursery.start(watch_signals, shutdown, 5.0, lambda: None)
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True), shutdown.phase(60.0, until=Urgency.HURRIED):
                os.kill(os.getpid(), signal.SIGTERM)
                await trio.sleep_forever()
            watcher.cancel()
    assert shutdown.urgency is Urgency.HURRIED
