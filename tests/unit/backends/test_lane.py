"""The legacy lane's routing decision: which calls a lane takes, when it is opened again after a failure,
when a run gives up on it, and that a backend refusing it is modern-only until its era is probed again.
Virtual time (autojump_clock) for the backoff; the lane's connection itself is tested in
tests/integration/test_legacy_lane.py."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from actors.backends.connection import BackendLink, BackendRequestError
from actors.backends.door import BackendDoor
from actors.backends.era import EraVerdict, legacy
from actors.backends.errors import BackendExitedError, BackendLaneError, BackendStartError
from actors.backends.lane import LaneRefusedError, LegacyLane
from actors.backends.lane_policy import LANE_BACKOFF_S, LANE_FAILURES_MAX, LaneState, for_lane
from actors.backends.probe import EraState
from actors.config import BackendEra, HealthConfig
from actors.protocol.envelopes import BackendCommand, Call, Cancel, Notify, ReplySlot
from actors.protocol.messages import Notification, RpcError
from actors.telemetry.meters import BackendMeter


@attrs.define
class PipeLike:
    written: list[dict[str, Any]] = attrs.field(factory=list)
    label: str = "pipe"

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        self.written += [orjson.loads(frame) for frame in frames]
        return True

    async def send_many(self, frames: Sequence[bytes]) -> None:
        self.written += [orjson.loads(frame) for frame in frames]


LANE_IDLE_S = 600.0
MODERN = EraVerdict(BackendEra.MODERN, "server/discover answered", "2026-07-28")


def call(call_id: int, method: str = "tools/call", *, from_legacy: bool = True, **params: Any) -> Call:
    return Call(call_id, method, {"name": "ask", **params}, "s1", ReplySlot(), from_legacy=from_legacy)


def era() -> EraState:
    return EraState(era=BackendEra.AUTO, gateway_name="gw", probe_timeout_s=1.0)


def lane_over(pipe: PipeLike, state: EraState | None = None) -> LegacyLane:
    modern = BackendLink(
        name="alpha",
        transport=pipe,  # type: ignore[arg-type]
        on_notification=lambda _: None,
        cancel_scope=trio.CancelScope(),
    )
    config = SimpleNamespace(name="alpha", lane_idle_s=LANE_IDLE_S, health=HealthConfig(interval_s=0))
    backend = SimpleNamespace(config=config, meter=BackendMeter("alpha"), events=None, roots="none")
    return LegacyLane(backend=backend, modern=modern, era=state or era())  # type: ignore[arg-type]


def test_only_a_legacy_clients_calls_that_may_ask_are_for_the_lane() -> None:
    assert for_lane(call(1))
    assert for_lane(call(2, "prompts/get")) and for_lane(call(3, "resources/read"))
    assert not for_lane(call(4, from_legacy=False))  # a modern client's: the modern connection's
    assert not for_lane(call(5, "tools/list")) and not for_lane(call(6, "resources/subscribe"))
    assert not for_lane(Cancel(7, "gone"))


def test_a_bridged_calls_next_round_stays_on_the_modern_connection() -> None:
    """The shim's retry carries the modern backend's state: only the connection that made it can take it."""
    assert not for_lane(call(1, requestState="abc"))
    assert not for_lane(call(2, inputResponses={}))


def test_a_pinned_era_or_a_legacy_backend_never_has_a_lane() -> None:
    assert era().lanes(MODERN)
    assert not era().lanes(legacy("server/discover got -32601"))
    for pinned in (BackendEra.MODERN, BackendEra.LEGACY):
        assert not EraState(era=pinned, gateway_name="gw", probe_timeout_s=1.0).lanes(MODERN)


async def test_a_backend_that_refuses_the_lane_is_modern_only_until_its_era_is_probed_again() -> None:
    state = era()
    state._known = MODERN
    lane = lane_over(PipeLike(), state)
    refused = BackendRequestError("initialize", RpcError(-32022, "Unsupported protocol version"))
    lane._closed(None, LaneRefusedError(refused.without_stderr))
    assert lane.state is LaneState.REFUSED and not lane.wants(call(1))
    assert not state.lanes(MODERN)  # the next run of this gateway opens none either
    state.forget("it answered tools/call with -32022")
    assert state.lanes(MODERN)


async def test_a_lane_that_failed_is_opened_again_after_a_backoff_and_given_up_after_the_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lane = lane_over(PipeLike())
    assert lane.wants(call(1))
    lane._closed(None, BackendExitedError("connection closed"))
    assert lane.state is LaneState.CLOSED and not lane.wants(call(2))  # the bridge meanwhile
    await trio.sleep(LANE_BACKOFF_S)
    assert lane.wants(call(3))
    lane._closed(None, BackendStartError("exited during start-up"))
    await trio.sleep(LANE_BACKOFF_S)
    assert not lane.wants(call(4))  # the backoff doubled
    await trio.sleep(LANE_BACKOFF_S)
    assert lane.wants(call(5))
    for _ in range(LANE_FAILURES_MAX - 2):
        lane._closed(None, BackendExitedError("connection closed"))
    assert lane.state is LaneState.GAVE_UP
    await trio.sleep(3600)
    assert not lane.wants(call(6))


async def test_calls_that_waited_for_a_lane_that_did_not_open_go_over_the_modern_connection() -> None:
    pipe = PipeLike()
    lane = lane_over(pipe)
    lane.state, lane._pending = LaneState.OPENING, [call(1), call(2)]
    frames = lane._closed(None, BackendStartError("cannot start"))
    assert [orjson.loads(frame)["id"] for frame in frames] == [1, 2]
    assert set(lane.modern.inflight) == {1, 2}  # answered by the modern run from now on, whatever happens


async def test_the_lane_takes_its_calls_and_a_copy_of_cancels_and_leaves_the_rest() -> None:
    lane = lane_over(PipeLike())
    assert not lane.takes(Cancel(1, "gone"))  # no call yet: nothing of the lane's to cancel
    assert not lane.takes(call(2, from_legacy=False))
    assert lane.takes(call(3))
    assert not lane.takes(Cancel(3, "gone"))  # the modern connection looks too
    queued = [lane._recv.receive_nowait(), lane._recv.receive_nowait()]
    assert [type(command).__name__ for command in queued] == ["Call", "Cancel"]


async def test_a_full_lane_inbox_leaves_the_call_to_the_modern_connection() -> None:
    lane = lane_over(PipeLike())
    taken = 0
    while lane.takes(call(100 + taken)):
        taken += 1
    assert taken > 0 and not lane.takes(call(1))


async def test_the_door_leaves_a_lane_call_to_the_backend_actor() -> None:
    pipe = PipeLike()
    lane = lane_over(pipe)
    _calls, inbox = trio.open_memory_channel[BackendCommand](4)
    door = BackendDoor(lane.modern, inbox, lane)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(inbox.receive)  # the actor, idle
        await trio.testing.wait_all_tasks_blocked()
        assert not door.call_now(call(1))
        assert door.call_now(call(2, from_legacy=False))
        nursery.cancel_scope.cancel()
    assert [frame["id"] for frame in pipe.written] == [2]


async def test_the_runs_end_answers_the_calls_the_lane_holds_naming_the_backend() -> None:
    lane = lane_over(PipeLike())
    lane.state = LaneState.OPENING  # they wait for it
    waiting, late = call(1), call(2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lane.run)
        assert lane.takes(waiting)
        await trio.testing.wait_all_tasks_blocked()
        assert lane._pending == [waiting]
        assert lane.takes(late)  # in its inbox as the run ends
        nursery.cancel_scope.cancel()
    for each in (waiting, late):
        reply = await each.reply_to.wait()
        assert reply.error is not None and "backend 'alpha' is unavailable" in reply.error.message
    assert not lane.takes(call(3))  # its inbox is closed: the run's end answers what comes now


async def test_a_clients_roots_change_is_copied_to_an_open_lane_only() -> None:
    """A modern connection drops it; a lane, a legacy connection, may have asked for the roots."""
    lane = lane_over(PipeLike())
    change = Notify(Notification("notifications/roots/list_changed"))
    assert not lane.takes(change)
    lane.state = LaneState.OPEN
    assert not lane.takes(change)  # the run's connection looks too
    assert lane._recv.receive_nowait() is change
    with pytest.raises(trio.WouldBlock):
        lane._recv.receive_nowait()  # only the one made while open


async def test_failed_openings_are_counted_in_a_row_and_an_opening_starts_the_count_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lane = lane_over(PipeLike())
    for _ in range(LANE_FAILURES_MAX - 1):
        lane._closed(None, BackendStartError("exited during start-up"))
        await trio.sleep(LANE_BACKOFF_S * 2**LANE_FAILURES_MAX)
    lane_link = lane_over(PipeLike()).modern  # a link of its own for the lane
    async with trio.open_nursery() as tasks:
        await lane._opened(lane_link, tasks)
    assert lane.failures == 0 and lane.state is LaneState.OPEN
    lane._closed(lane_link, None, opened=True)  # the run ended
    lane._closed(None, BackendStartError("exited during start-up"))
    assert lane.failures == 1


async def test_an_open_lane_that_dies_ends_the_run_and_answers_its_calls_only_as_the_run_ends() -> None:
    """Issue #34: its death is the backend's, as the death of its only process is: the run's link is lost
    (the backend actor takes its tools out of the catalog, then ends the run and the supervisor counts the
    restart); the lane's calls are not answered before that, and it is not opened again quietly."""
    lane = lane_over(PipeLike())
    run_lost = trio.Event()
    lane.modern.on_lost = run_lost.set  # the backend actor's RunEnd
    lane_link = lane_over(PipeLike()).modern
    held = call(1)
    async with trio.open_nursery() as tasks:
        await lane._opened(lane_link, tasks)
        await lane._write(lane_link, [held])
    lane_link.lose(BackendExitedError("connection closed"))  # what its reader does at the end of its stream
    assert run_lost.is_set() and isinstance(lane.modern.lost, BackendLaneError)
    assert str(lane.modern.lost) == "its legacy lane (pipe) ended: connection closed"
    assert not lane_link.cancel_scope.cancel_called and not held.reply_to.filled  # type: ignore[union-attr]
    lane._closed(lane_link, lane_link.lost, opened=True)  # as the run's end reaches it
    reply = await held.reply_to.wait()  # type: ignore[union-attr]
    assert reply.error is not None and "its legacy lane ended: connection closed" in reply.error.message
    assert lane.state is LaneState.CLOSED and lane.failures == 0


async def test_an_open_lane_with_no_call_for_lane_idle_s_is_closed_and_the_next_call_opens_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Not a failure: no backoff, nothing counted. A call in flight keeps it open however long it takes."""
    lane_link = lane_over(PipeLike()).modern  # a link of its own for the lane
    lane = lane_over(PipeLike())
    lane.state, lane._link, lane._last_call_at = LaneState.OPEN, lane_link, trio.current_time()
    closed = trio.Event()

    async def until_idle() -> None:
        await lane._until_idle(lane_link)
        closed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(until_idle)
        await trio.sleep(LANE_IDLE_S / 2)
        await lane._write(lane_link, [call(1)])  # in flight from now on, unanswered
        await trio.sleep(LANE_IDLE_S * 3)
        assert lane.state is LaneState.OPEN and not closed.is_set()
        del lane_link.inflight[1]  # answered
        await closed.wait()
    assert trio.current_time() <= LANE_IDLE_S * 5.5  # idle from the answer on, give or take one period
    assert lane.state is LaneState.CLOSED and lane._link is None and lane.failures == 0
    assert lane.backend.meter.eras == "modern"
    assert lane.wants(call(2))  # at once: no backoff
