"""A backend's tool policy from the config ([backends.tools]): which tools are shown, under which names,
with which annotation overrides. Applied by the catalog to each tool list a backend reports, before the
naming rule, so a hidden tool is neither listed nor routable (a call to it gets -32602 like any unknown
tool), and a renamed one is routed back to the backend under its own name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Final

import attrs

from actors.config.checks import every, not_blank, rule
from actors.output.limits import MAX_OUTPUT_CHARS, MIN_OUTPUT_CHARS
from actors.protocol.messages import Tool

HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
output_chars: Final = rule(  # max_output_chars, here and in [gateway] (actors/output/limits.py)
    lambda value: MIN_OUTPUT_CHARS <= value <= MAX_OUTPUT_CHARS,
    f"must be from {MIN_OUTPUT_CHARS} to {MAX_OUTPUT_CHARS} characters",
)


@attrs.frozen
class ToolPolicy:
    allow: tuple[str, ...] | None = None  # glob patterns; None: every tool
    deny: tuple[str, ...] = ()  # glob patterns, applied after allow
    # backend's name -> name the gateway uses
    rename: Mapping[str, str] = attrs.field(factory=dict, validator=every(not_blank))
    annotations: Mapping[str, Mapping[str, bool]] = attrs.field(factory=dict)  # backend's name -> hints
    # backend's name -> the characters of its results a client gets (actors/output/limits.py)
    max_output_chars: Mapping[str, int] = attrs.field(factory=dict, validator=every(output_chars))

    def shows(self, name: str) -> bool:
        if self.allow is not None and not any(fnmatchcase(name, pattern) for pattern in self.allow):
            return False
        return not any(fnmatchcase(name, pattern) for pattern in self.deny)

    def apply(self, tools: Sequence[Tool]) -> tuple[tuple[Tool, ...], dict[str, str]]:
        """The tools as the gateway shows them, and {shown name -> backend's own name} for the renamed."""
        shown: list[Tool] = []
        originals: dict[str, str] = {}
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str) or not self.shows(name):
                continue
            overrides = self.annotations.get(name)
            if overrides:
                annotations = tool.get("annotations")
                tool = {
                    **tool,
                    "annotations": {**(annotations if isinstance(annotations, dict) else {}), **overrides},
                }
            new_name = self.rename.get(name)
            if new_name is not None:
                tool = {**tool, "name": new_name}
                originals[new_name] = name
            shown.append(tool)
        return tuple(shown), originals
