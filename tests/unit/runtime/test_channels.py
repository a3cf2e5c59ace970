"""channels.put: no yield when there is room, waits like send when full; receiver_idle."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.runtime.channels import put, receiver_idle


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


def _idle_by_statistics(channel: trio.MemorySendChannel[int]) -> bool:
    stats = channel.statistics()
    return stats.current_buffer_used == 0 and stats.tasks_waiting_receive > 0


async def test_receiver_idle_agrees_with_statistics_in_every_state() -> None:
    """The fields receiver_idle reads are trio's; this holds them to its public statistics."""
    send, receive = trio.open_memory_channel[int](2)
    seen: list[bool] = []

    def both() -> bool:
        assert receiver_idle(send) == receiver_idle(receive) == _idle_by_statistics(send)
        return receiver_idle(send)

    seen.append(both())  # nobody waits
    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive.receive)
        await trio.testing.wait_all_tasks_blocked()
        seen.append(both())  # a receiver waits on an empty channel
        send.send_nowait(1)
        seen.append(both())  # handed over, not yet taken: the receiver is no longer waiting
    send.send_nowait(2)
    seen.append(both())  # queued, nobody waits
    assert seen == [False, True, False, False]
