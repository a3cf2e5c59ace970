"""Resource subscriptions shared by every session: a backend is subscribed to a URI while at least one
session wants its updates, and subscribed again after it restarts.

The first session to subscribe makes the gateway subscribe at the backend; the last to unsubscribe (or to
end) makes it unsubscribe. Keys are (backend, the backend's own URI).
"""

from __future__ import annotations

import attrs

Key = tuple[str, str]


@attrs.define
class Subscriptions:
    _sessions: dict[Key, set[str]] = attrs.field(factory=dict)

    def add(self, backend: str, uri: str, session: str) -> bool:
        """Record the session's interest; True when it is the first, so the backend must be asked."""
        sessions = self._sessions.setdefault((backend, uri), set())
        first = not sessions
        sessions.add(session)
        return first

    def remove(self, backend: str, uri: str, session: str) -> bool:
        """Forget the session's interest; True when it was the last, so the backend may stop."""
        sessions = self._sessions.get((backend, uri))
        if sessions is None or session not in sessions:
            return False
        sessions.discard(session)
        if sessions:
            return False
        del self._sessions[(backend, uri)]
        return True

    def drop_session(self, session: str) -> list[Key]:
        """Forget an ended session everywhere; the keys nobody wants any more."""
        released = []
        for key in [key for key, sessions in self._sessions.items() if session in sessions]:
            if self.remove(*key, session):
                released.append(key)
        return released

    def uris_of(self, backend: str) -> list[str]:
        """The URIs some session wants from this backend."""
        return [uri for (owner, uri) in self._sessions if owner == backend]
