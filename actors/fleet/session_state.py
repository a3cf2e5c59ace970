"""What a legacy session's client set after its initialize, kept fleet-wide beside the session's facts: its
log level (logging/setLevel) and its resource subscriptions (each URI as the client wrote it). A replica that
takes the session up applies them again (frontends/http/fleet_sessions.py), so its client keeps hearing the
logs and updates it asked for whichever replica serves it.

Kept in a Redis hash of its own (`level`, and one `sub:<uri>` field per subscription), changed field by
field: two replicas serving one session never overwrite each other's change. What is read back is checked
like any input: a level the spec does not name, a URI that is not text or is longer than MAX_KEPT_URI_CHARS,
or more than MAX_KEPT_URIS of them, is left out.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from actors.protocol.versions import LOG_LEVELS
from actors.session.resources import MAX_SUBSCRIPTIONS

LEVEL: Final = b"level"
SUB: Final = b"sub:"
MAX_KEPT_URI_CHARS: Final = 2048  # a longer subscribed URI stays with the replica that took it
MAX_KEPT_URIS: Final = MAX_SUBSCRIPTIONS  # read back; each replica's copy holds at most this many too


@attrs.define
class SessionState:
    """One session's level and subscriptions, as this replica knows them."""

    level: str | None = None
    uris: set[str] = attrs.field(factory=set)

    def fields(self) -> dict[bytes, bytes]:
        """The whole state as hash fields (written again when Redis came back empty)."""
        kept = {SUB + uri.encode(): b"1" for uri in self.uris}
        return {**kept, LEVEL: self.level.encode()} if self.level is not None else kept

    @classmethod
    def of_fields(cls, raw: Any) -> SessionState:
        """The state read back from the hash; what is unusable is left out."""
        state = cls()
        if not isinstance(raw, dict):
            return state
        for field, value in raw.items():
            if not isinstance(field, bytes) or not isinstance(value, bytes):
                continue
            if field == LEVEL:
                level = value.decode("ascii", "replace")
                state.level = level if level in LOG_LEVELS else None
            elif field.startswith(SUB) and len(state.uris) < MAX_KEPT_URIS:
                uri = field[len(SUB) :].decode("utf-8", "replace")
                if uri and len(uri) <= MAX_KEPT_URI_CHARS:
                    state.uris.add(uri)
        return state


def change_of(method: str, params: Any) -> tuple[str, str] | None:
    """What an answered request changes: ("level", level), ("subscribe" | "unsubscribe", uri); None for
    anything else or a value that is not kept."""
    name = "level" if method == "logging/setLevel" else "uri"
    value = params.get(name) if isinstance(params, dict) else None
    if not isinstance(value, str):
        return None
    if method == "logging/setLevel":
        return ("level", value) if value in LOG_LEVELS else None
    if method in ("resources/subscribe", "resources/unsubscribe") and 0 < len(value) <= MAX_KEPT_URI_CHARS:
        return method.removeprefix("resources/"), value
    return None
