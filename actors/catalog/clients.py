"""The directory of client sessions that backends may address requests to.

A backend's request for a client (sampling, elicitation) normally goes to the session whose call is in
progress on that backend. When no call is, and exactly one initialized session is connected (a single
Claude Code over stdio, say), the request goes to that session; the directory is how a backend finds it.
roots/list goes only ever to that one session (a backend's roots are shared by every session using it), and
a backend that asked for roots is told they changed whenever that session changes (`wait_changed`).
"""

from __future__ import annotations

import attrs
import trio

from actors.protocol.envelopes import Mail


@attrs.define
class ClientDirectory:
    """Sessions with an initialized client, each by the channel that takes backends' requests for it."""

    _sessions: dict[str, trio.MemorySendChannel[Mail]] = attrs.field(factory=dict)
    _changed: trio.Event = attrs.field(factory=trio.Event)  # set, and replaced, at every join and leave

    def join(self, session: str, asks_to: trio.MemorySendChannel[Mail]) -> None:
        self._sessions[session] = asks_to
        self._touch()

    def leave(self, session: str) -> None:
        if self._sessions.pop(session, None) is not None:
            self._touch()

    def only(self) -> trio.MemorySendChannel[Mail] | None:
        """The one session connected, if there is exactly one."""
        if len(self._sessions) != 1:
            return None
        (asks_to,) = self._sessions.values()
        return asks_to

    async def wait_changed(self) -> None:
        """Return after the next join or leave."""
        await self._changed.wait()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def __len__(self) -> int:
        return len(self._sessions)
