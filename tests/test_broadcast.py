"""The fan-out primitive: every listener gets every item; a slow one loses only its own overflow."""

from __future__ import annotations

from actors.broadcast import LISTENER_QUEUE, Broadcast


async def test_every_listener_gets_items_and_a_full_one_drops_without_blocking() -> None:
    hub: Broadcast[int] = Broadcast()
    hub.publish(0)  # nobody listens: nothing happens
    with hub.listen() as quick, hub.listen() as slow:
        for n in range(LISTENER_QUEUE + 5):
            hub.publish(n)  # never blocks
            assert quick.receive_nowait() == n
        assert hub.dropped == 5  # the slow listener's overflow
        assert [slow.receive_nowait() for _ in range(LISTENER_QUEUE)] == list(range(LISTENER_QUEUE))
    hub.publish(1)  # listeners gone: forgotten
    assert hub.dropped == 5
