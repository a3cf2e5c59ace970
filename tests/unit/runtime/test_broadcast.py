"""The fan-out primitive and the Watch's followers: every listener gets every item; a slow one loses only
its own overflow; nobody ever blocks the publisher."""

from __future__ import annotations

import trio

from actors.runtime.broadcast import Broadcast
from actors.runtime.watch import Watch

QUEUE = 8


async def test_every_listener_gets_items_and_a_full_one_drops_without_blocking() -> None:
    hub: Broadcast[int] = Broadcast()
    hub.publish(0)  # nobody listens: nothing happens
    quick_to, quick = trio.open_memory_channel[int](QUEUE)
    slow_to, slow = trio.open_memory_channel[int](QUEUE)
    with hub.deliver_to(quick_to), hub.deliver_to(slow_to):
        for n in range(QUEUE + 5):
            hub.publish(n)  # never blocks
            assert quick.receive_nowait() == n
        assert hub.dropped == 5  # the slow listener's overflow
        assert [slow.receive_nowait() for _ in range(QUEUE)] == list(range(QUEUE))
    hub.publish(1)  # listeners gone: forgotten
    assert hub.dropped == 5
    slow.close()
    with hub.deliver_to(slow_to):
        hub.publish(2)  # a closed mailbox is dropped from the listeners, not an error
    assert hub.dropped == 5


async def test_a_watch_puts_its_marker_in_each_followers_mailbox_and_never_blocks() -> None:
    watch = Watch("v0")
    mail_to, mail = trio.open_memory_channel[object](2)
    marker = object()
    with watch.follow(mail_to, marker):
        for n in range(1, 5):
            watch.publish(f"v{n}")  # a full mailbox loses markers, never the newest value
        assert [mail.receive_nowait(), mail.receive_nowait()] == [marker, marker]
        assert watch.value == "v4" and watch.version == 4
    watch.publish("v5")  # no longer followed
    assert mail.statistics().current_buffer_used == 0
