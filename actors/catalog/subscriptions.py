"""Resource subscriptions shared by every session: a backend is subscribed to a URI while at least one
session wants its updates, and subscribed again after it restarts.

The first session to subscribe makes the gateway subscribe at the backend; a session that comes while
that subscribe is still in flight waits for its outcome instead of being told "subscribed" early (if the
backend refuses, the next one asks again and gets its own answer). The last to unsubscribe (or to end)
makes the gateway unsubscribe. Keys are (backend, the backend's own URI).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

Key = tuple[str, str]
Answer = TypeVar("Answer")


@attrs.define
class _Interest:
    sessions: set[str] = attrs.field(factory=set)
    confirmed: bool = False  # the backend said yes (renewed after each restart by the backend actor)
    asking: trio.Event | None = None  # set when the subscribe in flight at the backend has its answer


@attrs.define
class Subscriptions:
    _interests: dict[Key, _Interest] = attrs.field(factory=dict)

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
        if interest.sessions or interest.asking is not None:
            return False
        del self._interests[(backend, uri)]
        return interest.confirmed

    def drop_session(self, session: str) -> list[Key]:
        """Forget an ended session everywhere; the keys nobody wants any more."""
        released = []
        for key in [key for key, interest in self._interests.items() if session in interest.sessions]:
            if self.remove(*key, session):
                released.append(key)
        return released

    def uris_of(self, backend: str) -> list[str]:
        """The URIs some session wants from this backend."""
        return [
            uri
            for (owner, uri), interest in self._interests.items()
            if owner == backend and interest.confirmed
        ]
