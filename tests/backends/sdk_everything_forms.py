"""The forms sdk_everything.py's handshake-era tools ask with ctx.elicit, how their answers read back, and
the small parts of its HTTP mode: a prompt it adds and removes, and an event log for SSE resumption.

The SDK renders a pydantic model as the requested schema; `T | None = None` becomes an optional field of
type T (no null arm), so every field below is optional unless it has no default."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Final

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage
from pydantic import BaseModel, Field

EVENTS_KEPT: Final = 1024  # HTTP mode only: a client resumes within seconds, so older events may go


class Defaults(BaseModel):
    """SEP-1034: a default for each primitive type, the enum included."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


def choices(prefix: str, *titles: str) -> list[dict[str, str]]:
    """Titled options: `const` is the value sent back, `title` what the user reads."""
    return [{"const": f"{prefix}{n}", "title": title} for n, title in enumerate(titles, 1)]


OPTIONS: Final = ["option1", "option2", "option3"]


class Enums(BaseModel):
    """SEP-1330: single and multi-select, untitled and titled, and the legacy enumNames form."""

    untitledSingle: str | None = Field(
        default=None, description="Pick one", json_schema_extra={"enum": OPTIONS}
    )
    titledSingle: str | None = Field(
        default=None,
        description="Pick one",
        json_schema_extra={"oneOf": choices("value", "First Option", "Second Option", "Third Option")},
    )
    legacyEnum: str | None = Field(
        default=None,
        description="Pick one (legacy enumNames)",
        json_schema_extra={
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    )
    untitledMulti: list[str] | None = Field(
        default=None, description="Pick any", json_schema_extra={"items": {"type": "string", "enum": OPTIONS}}
    )
    titledMulti: list[str] | None = Field(
        default=None,
        description="Pick any",
        json_schema_extra={
            "items": {"anyOf": choices("value", "First Choice", "Second Choice", "Third Choice")}
        },
    )


def outcome(label: str, answer: ElicitationResult[BaseModel]) -> str:
    """One line saying what the user did, and what they sent when they accepted."""
    content = answer.data.model_dump_json(exclude_none=True) if answer.action == "accept" else "{}"
    return f"{label}: action={answer.action}, content={content}"


def dynamic() -> str:
    return "A dynamic prompt."


def dynamic_prompt() -> Prompt:
    return Prompt.from_function(dynamic, name="test_dynamic_prompt", description="Listed for a moment")


class EventLog(EventStore):
    """The last EVENTS_KEPT events of every SSE stream, so a client that reconnects with Last-Event-ID
    (the SSE polling scenario) gets what it missed. HTTP mode only: over stdio the gateway keeps them."""

    def __init__(self) -> None:
        self.events: deque[tuple[str, int, JSONRPCMessage | None]] = deque(maxlen=EVENTS_KEPT)
        self.numbers = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        number = next(self.numbers)
        self.events.append((stream_id, number, message))
        return str(number)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        if not last_event_id.isdigit():
            return None
        after = int(last_event_id)
        stream = next((stream for stream, number, _ in self.events if number == after), None)
        if stream is None:
            return None
        for each, number, message in list(self.events):
            if each == stream and number > after and message is not None:
                await send_callback(EventMessage(message, str(number)))
        return stream
