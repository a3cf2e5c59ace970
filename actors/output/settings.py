"""The output limits in force: the config's numbers, swapped whole by a reload."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from actors.output.limits import CLIENT_DEFAULT_CHARS, effective_limit


@attrs.frozen
class OutputLimits:
    """`[gateway] max_output_chars` and each backend's `[backends.tools] max_output_chars`."""

    gateway: int | None = None
    tools: Mapping[str, Mapping[str, int]] = attrs.field(
        factory=dict
    )  # backend -> its own tool name -> limit

    def limit(self, backend: str, tool: str, route: int | None = None) -> int | None:
        """The limit on one tool's results (`tool`: the backend's own name; `route`: its route's limit)."""
        mine = self.tools.get(backend)
        return effective_limit(mine.get(tool) if mine else None, route, self.gateway)

    def may_advertise(self, route: int | None = None) -> bool:
        """Whether any limit in force is above CLIENT_DEFAULT_CHARS (else no definition needs telling)."""
        limits = [self.gateway, route, *(n for mine in self.tools.values() for n in mine.values())]
        return any(n is not None and n > CLIENT_DEFAULT_CHARS for n in limits)


@attrs.define
class OutputGate:
    """Owns: the OutputLimits in force, shared by every session; a reload swaps them (one assignment)."""

    limits: OutputLimits = attrs.field(factory=OutputLimits)
    generation: int = 0  # bumped by every swap: what a session's cached list is good for

    def swap(self, limits: OutputLimits) -> None:
        if limits != self.limits:
            self.limits, self.generation = limits, self.generation + 1
