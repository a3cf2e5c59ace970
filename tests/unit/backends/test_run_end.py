"""The end of a ready run (backends/run_end.py): its tools leave the catalog before its calls are answered
(issue #34, point 11). Memory channels stand for the catalog; the link's transport is never used."""

from __future__ import annotations

import trio
import trio.testing

from actors.backends.connection import BackendLink
from actors.backends.errors import BackendExitedError
from actors.backends.run_end import WITHDRAW_WAIT_S, RunEnd
from actors.catalog import CatalogEvent
from actors.protocol.envelopes import BackendLost


def link() -> BackendLink:
    return BackendLink(
        name="alpha",
        transport=None,  # type: ignore[arg-type]
        on_notification=lambda _: None,
        cancel_scope=trio.CancelScope(),
    )


async def test_a_loss_is_told_to_the_catalog_and_the_run_cancelled_only_once_it_has_published() -> None:
    catalog, inbox = trio.open_memory_channel[CatalogEvent](1)
    run = link()
    end = RunEnd(name="alpha", catalog=catalog, link=run)
    async with trio.open_nursery() as nursery:
        end.arm(nursery)
        run.lose(BackendExitedError("connection closed"))
        lost = await inbox.receive()
        assert isinstance(lost, BackendLost) and lost.name == "alpha" and lost.error is run.lost
        await trio.testing.wait_all_tasks_blocked()
        assert not run.cancel_scope.cancel_called  # nothing is answered while the catalog still lists it
        lost.published.set()
        await trio.testing.wait_all_tasks_blocked()
        assert run.cancel_scope.cancel_called
        await end.withdraw()  # the run's `finally`: done already, nothing sent again
        assert inbox.statistics().current_buffer_used == 0


async def test_nothing_is_withdrawn_for_a_run_never_ready_or_not_lost() -> None:
    catalog, inbox = trio.open_memory_channel[CatalogEvent](1)
    run = link()
    end = RunEnd(name="alpha", catalog=catalog, link=run)
    await end.withdraw()  # not ready yet (the era probe may start it again unseen by the supervisor)
    run.lose(BackendExitedError("connection closed"))
    assert run.cancel_scope.cancel_called  # not armed: cancelled at once, as before
    await end.withdraw()
    async with trio.open_nursery() as nursery:
        end.arm(nursery)
        nursery.cancel_scope.cancel()
    assert inbox.statistics().current_buffer_used == 0


async def test_a_stuck_or_closed_catalog_delays_the_answers_by_at_most_the_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    catalog, _inbox = trio.open_memory_channel[CatalogEvent](0)  # open, and nobody takes it
    run = link()
    end = RunEnd(name="alpha", catalog=catalog, link=run)
    async with trio.open_nursery() as nursery:
        end.arm(nursery)
        run.lose(BackendExitedError("connection closed"))
    assert run.cancel_scope.cancel_called and trio.current_time() == WITHDRAW_WAIT_S
    closed_catalog, _ = trio.open_memory_channel[CatalogEvent](0)
    closed_catalog.close()
    run = link()
    end = RunEnd(name="alpha", catalog=closed_catalog, link=run)
    async with trio.open_nursery() as nursery:
        end.arm(nursery)
        run.lose(BackendExitedError("connection closed"))
    assert run.cancel_scope.cancel_called and trio.current_time() == WITHDRAW_WAIT_S  # at once
