"""The refusal a network frontend answers with, and the principal a request comes from
(actors.identity.principal, re-exported here for the frontends).

The token itself is never logged; only its subject is, once it is verified.
"""

from __future__ import annotations

from actors.identity.principal import Principal as Principal
from actors.protocol.messages import RequestId


class Refused(Exception):
    """A connection or request that may not go on: the HTTP status, why, and headers for the answer."""

    def __init__(self, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or []


class RequestRefused(Refused):
    """A Refused for a request whose id is known: its error body names that id."""

    def __init__(self, refused: Refused, request_id: RequestId) -> None:
        super().__init__(refused.status, refused.reason, refused.headers)
        self.request_id = request_id
