"""The backends supervisor a reload changes while it runs: children added, stopped (after their cleanup)
and replaced, siblings untouched (MockClock)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from actors.runtime.children import Children
from actors.runtime.supervisor import ChildEvent, ChildSpec, ChildStarted


def spec(name: str, runs: list[str], cleaned: list[str], tag: str = "") -> ChildSpec:
    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        runs.append(name + tag)
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1.0)  # a backend's cleanup: answering calls, ending its process
            cleaned.append(name + tag)

    return ChildSpec(name, run)


async def test_children_are_added_stopped_after_their_cleanup_and_replaced(autojump_clock: Any) -> None:
    runs: list[str] = []
    cleaned: list[str] = []
    events, reports = trio.open_memory_channel[ChildEvent](100)
    async with trio.open_nursery() as nursery:
        children: Children = await nursery.start(
            Children(events).run, [spec("a", runs, cleaned), spec("b", runs, cleaned)]
        )
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(runs) == ["a", "b"]

        children.start(spec("c", runs, cleaned))
        await children.stop("a")
        assert cleaned == ["a"]  # stop() returns once its cleanup is done
        await children.replace(spec("b", runs, cleaned, tag="'"))
        await trio.testing.wait_all_tasks_blocked()
        assert cleaned == ["a", "b"] and runs[-1] == "b'"
        assert sorted(children.ids()) == ["b", "c"]
        try:
            children.start(spec("c", runs, cleaned))
        except ValueError:
            pass
        else:
            raise AssertionError("a second child under one id")
        nursery.cancel_scope.cancel()
    started = []
    while True:
        try:
            event = reports.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            break
        if isinstance(event, ChildStarted):
            started.append(event.id)
    assert sorted(started[:2]) == ["a", "b"] and started[2:] == ["c", "b"]
