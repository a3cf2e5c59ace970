"""channels.put: no trip through the scheduler when there is room; waits like send when full."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.runtime.channels import put


async def test_put_with_room_does_not_yield() -> None:
    send, receive = trio.open_memory_channel[int](1)
    others_ran = False

    async def other() -> None:
        nonlocal others_ran
        others_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await put(send, 1)
        assert not others_ran  # send() would have let `other` run here
        assert receive.receive_nowait() == 1


async def test_put_on_a_full_channel_waits_for_room() -> None:
    send, receive = trio.open_memory_channel[int](1)
    await put(send, 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(put, send, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert send.statistics().tasks_waiting_send == 1
        assert await receive.receive() == 1
    assert receive.receive_nowait() == 2


async def test_put_on_a_closed_channel_raises_like_send() -> None:
    send, receive = trio.open_memory_channel[int](1)
    await receive.aclose()
    with pytest.raises(trio.BrokenResourceError):
        await put(send, 1)
