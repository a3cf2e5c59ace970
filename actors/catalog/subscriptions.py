"""Resource subscriptions shared by every session: a backend is subscribed to a URI while at least one
session wants its updates, and subscribed again after it restarts.

The first session to subscribe makes the gateway subscribe at the backend; a session that comes while
that subscribe is still in flight waits for its outcome instead of being told "subscribed" early (if the
backend refuses, the next one asks again and gets its own answer). The last to unsubscribe (or to end)
makes the gateway unsubscribe. Keys are (backend, the backend's own URI).

What a holder (a session, or one listen of it) holds is indexed by holder, so its end costs what it held, not
the size of the table. The unsubscribes its end makes necessary go out at once; one for a backend whose inbox
is full is queued here and sent by one task of the gateway's (`send_released`), which waits for room instead
of dropping it: the holder's own scope is gone by then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import attrs
import trio

from actors.catalog.view import CatalogView
from actors.protocol.envelopes import Call, ReplySlot, next_call_id
from actors.runtime.watch import Watch

Key = tuple[str, str]
Answer = TypeVar("Answer")
RELEASE_SEND_S: Final = 5.0  # a backend whose inbox stays full that long is retried after the others


@attrs.define
class _Interest:
    sessions: set[str] = attrs.field(factory=set)
    confirmed: bool = False  # the backend said yes (renewed after each restart by the backend actor)
    asking: trio.Event | None = None  # set when the subscribe in flight at the backend has its answer


@attrs.define
class Subscriptions:
    _interests: dict[Key, _Interest] = attrs.field(factory=dict)
    _held: dict[str, set[Key]] = attrs.field(factory=dict)  # holder -> its keys, for an end in O(its own)
    _released: dict[Key, None] = attrs.field(factory=dict)  # nobody wants these: to unsubscribe, in order
    _wake: trio.Event = attrs.field(factory=trio.Event)

    async def subscribe(
        self,
        backend: str,
        uri: str,
        session: str,
        ask: Callable[[], Awaitable[Answer]],
        accepted: Callable[[Answer], bool],
    ) -> Answer | None:
        """Record the session's interest, asking the backend (with `ask`) unless it already said yes. Returns
        the backend's answer when this session asked, None when it joined a confirmed subscription. A refusal
        (or a cancelled ask) forgets this session's interest."""
        interest = self._interests.setdefault((backend, uri), _Interest())
        interest.sessions.add(session)
        self._held.setdefault(session, set()).add((backend, uri))
        self._released.pop((backend, uri), None)  # wanted again before its unsubscribe went out
        while not interest.confirmed:
            if interest.asking is not None:
                await interest.asking.wait()  # somebody's subscribe is in flight: its outcome decides
                continue
            interest.asking = asked = trio.Event()
            answer: Answer | None = None
            try:
                answer = await ask()
            finally:
                interest.asking = None
                asked.set()
                interest.confirmed = answer is not None and accepted(answer)
                if not interest.confirmed:
                    self.remove(backend, uri, session)
                elif not interest.sessions:  # everyone left while it was asked; its updates reach nobody
                    del self._interests[(backend, uri)]
            return answer
        return None

    def remove(self, backend: str, uri: str, session: str) -> bool:
        """Forget the session's interest; True when it was the last, so the backend may stop."""
        interest = self._interests.get((backend, uri))
        if interest is None or session not in interest.sessions:
            return False
        interest.sessions.discard(session)
        held = self._held.get(session)
        if held is not None:
            held.discard((backend, uri))
            if not held:
                del self._held[session]
        if interest.sessions or interest.asking is not None:
            return False
        del self._interests[(backend, uri)]
        return interest.confirmed

    def drop_session(self, session: str) -> list[Key]:
        """Forget an ended holder everywhere (in the time of what it held); the keys nobody wants any more."""
        released = []
        for key in list(self._held.get(session, ())):
            if self.remove(*key, session):
                released.append(key)
        return released

    def release(self, session: str, view: CatalogView) -> None:
        """A holder ended: forget it, and unsubscribe at once (in order with what its session sends next)
        from each key nobody wants any more; one whose backend's inbox is full is queued for
        `send_released`, never dropped."""
        for key in self.drop_session(session):
            if not unsubscribe_now(view, *key):
                self._released[key] = None
                self._wake.set()

    def held_by(self, session: str) -> int:
        return len(self._held.get(session, ()))

    async def send_released(self, send: Callable[[str, str], Awaitable[bool]]) -> None:
        """Forever: unsubscribe at the backends what nobody wants. `send(backend, uri)` waits for room in
        the backend's inbox and says whether the backend was there to be told (a backend that is down has
        forgotten its subscriptions anyway). One that is still busy after RELEASE_SEND_S goes to the back of
        the queue, so one stuck backend does not hold up the others'."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._released:
                key = next(iter(self._released))
                del self._released[key]
                if key in self._interests:
                    continue  # wanted again meanwhile: its subscription stands
                with trio.move_on_after(RELEASE_SEND_S) as waited:
                    await send(*key)
                if waited.cancelled_caught and key not in self._interests:
                    self._released[key] = None

    def uris_of(self, backend: str) -> list[str]:
        """The URIs some session wants from this backend."""
        return [
            uri
            for (owner, uri), interest in self._interests.items()
            if owner == backend and interest.confirmed
        ]


def _unsubscribe_call(uri: str) -> Call:
    return Call(next_call_id(), "resources/unsubscribe", {"uri": uri}, "gateway", ReplySlot())


def unsubscribe_now(view: CatalogView, backend: str, uri: str) -> bool:
    """resources/unsubscribe put in an up backend's inbox; True unless the inbox was full (a backend that is
    down forgot its subscriptions when it went: nothing to tell it)."""
    status = view.backends.get(backend)
    if status is None or not status.ready or status.calls is None:
        return True
    try:
        status.calls.send_nowait(_unsubscribe_call(uri))
    except trio.WouldBlock:
        return False
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    return True


async def unsubscribe_at(catalog: Watch[CatalogView], backend: str, uri: str) -> bool:
    """resources/unsubscribe to a backend that is up, waiting for room in its inbox; False when it is down
    or its inbox has closed."""
    status = catalog.value.backends.get(backend)
    if status is None or not status.ready or status.calls is None:
        return False
    try:
        await status.calls.send(_unsubscribe_call(uri))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True
