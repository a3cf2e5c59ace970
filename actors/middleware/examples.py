"""Middleware that ships as an example to copy: read-only access for guests.

[[middleware]]
use = "actors.middleware.examples.ReadOnlyForGuests"
options = { writers = ["alice"] }
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.middleware.base import ClientInfo, Middleware, Tool


class ReadOnlyForGuests(Middleware):
    """Clients whose token subject is not in `writers` (stdio clients have none) see only the tools annotated
    readOnlyHint = true; the gateway refuses the others as unknown tools when such a client calls them."""

    def __init__(self, writers: Sequence[str] = ()) -> None:
        self.writers = frozenset(writers)

    def filter_tools(self, client: ClientInfo, tools: Sequence[Tool]) -> Sequence[Tool]:
        if client.subject is not None and client.subject in self.writers:
            return tools
        return [tool for tool in tools if (tool.get("annotations") or {}).get("readOnlyHint") is True]
