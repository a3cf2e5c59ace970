"""The directory of client sessions that backends may address requests to.

A backend's request for a client (sampling, elicitation, roots) normally goes to the session whose call is
in progress on that backend. When no call is, and exactly one initialized session is connected (a single
Claude Code over stdio, say), the request goes to that session; the directory is how a backend finds it.
"""

from __future__ import annotations

import attrs
import trio

from actors.envelopes import Mail


@attrs.define
class ClientDirectory:
    """Sessions with an initialized client, each by the channel that takes backends' requests for it."""

    _sessions: dict[str, trio.MemorySendChannel[Mail]] = attrs.field(factory=dict)

    def join(self, session: str, asks_to: trio.MemorySendChannel[Mail]) -> None:
        self._sessions[session] = asks_to

    def leave(self, session: str) -> None:
        self._sessions.pop(session, None)

    def only(self) -> trio.MemorySendChannel[Mail] | None:
        """The one session connected, if there is exactly one."""
        if len(self._sessions) != 1:
            return None
        (asks_to,) = self._sessions.values()
        return asks_to

    def __len__(self) -> int:
        return len(self._sessions)
