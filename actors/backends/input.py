"""What a backend sends, checked where it enters: every field the gateway reads or passes on to sessions.

A backend is a peer like any client: it may be buggy or hostile. Each check returns the clean value (or
None, or the reason an entry is unusable) and never raises, whatever the input; the link and the backend
actor drop what fails, logging it rate-limited. Sessions only ever get the clean forms built here, so a
backend's bad notification cannot reach, let alone crash, a session.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from actors.protocol.codec import shown
from actors.protocol.versions import LOG_LEVELS

CONTROLS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL, C1: never in a name, URI or title
TEXT_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # prose may keep \t \n \r


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_name(value: object) -> bool:
    """A name or URI the gateway routes on and clients show: a non-empty string without control characters."""
    return isinstance(value, str) and bool(value) and CONTROLS.search(value) is None


def _is_text(value: object) -> bool:
    return isinstance(value, str) and TEXT_CONTROLS.search(value) is None


def progress_params(params: object, token: object) -> dict[str, Any] | None:
    """notifications/progress params for the session, under its own `token`; None when malformed."""
    if not isinstance(params, dict) or not is_number(params.get("progress")):
        return None
    clean: dict[str, Any] = {"progressToken": token, "progress": params["progress"]}
    total, message = params.get("total"), params.get("message")
    if total is not None:
        if not is_number(total):
            return None
        clean["total"] = total
    if message is not None:
        if not _is_text(message):
            return None
        clean["message"] = message
    return clean


def log_params(params: object, backend: str) -> dict[str, Any] | None:
    """notifications/message params for sessions, the logger named after the backend; None when malformed."""
    if not isinstance(params, dict) or params.get("level") not in LOG_LEVELS or "data" not in params:
        return None
    return {"level": params["level"], "logger": backend, "data": params["data"]}


def updated_params(params: object) -> dict[str, Any] | None:
    """notifications/resources/updated params for sessions; None when malformed."""
    if not isinstance(params, dict) or not is_name(params.get("uri")):
        return None
    return {"uri": params["uri"]}


def elicitation_problem(params: Mapping[str, Any]) -> str | None:
    """Why an elicitation/create request cannot go to a client, or None. What the gateway reads of it is
    checked; the rest is the client's to judge."""
    mode = params.get("mode", "form")
    if mode not in ("form", "url"):
        return f"mode must be 'form' or 'url', not {shown(mode)}"
    if mode == "url" and not is_name(params.get("elicitationId")):
        return "a URL elicitation needs a string elicitationId"
    return None


# --- list entries ----------------------------------------------------------------------------------------

# kind -> (the field that names an entry, fields that must be text when present)
NAMED_BY: Final = {"tools": "name", "prompts": "name", "resources": "uri", "templates": "uriTemplate"}
_OPTIONAL_TEXT: Final = ("title", "description", "mimeType")
_OPTIONAL_OBJECTS: Final = ("annotations", "_meta")


def entry_problem(kind: str, entry: object) -> str | None:
    """Why one entry of a tools, prompts, resources or resource templates list is unusable, or None.
    Checked: what the gateway routes on and what an SDK client would refuse the whole list for."""
    if not isinstance(entry, dict):
        return f"an entry that is not an object: {shown(entry)}"
    key = NAMED_BY[kind]
    if not is_name(entry.get(key)):
        return f"an entry whose {key} is not a string without control characters: {shown(entry.get(key))}"
    if not is_name(entry.get("name")):
        return f"{shown(entry[key])}: its name is not a string without control characters"
    for field in _OPTIONAL_TEXT:
        if field in entry and not _is_text(entry[field]):
            return f"{shown(entry[key])}: its {field} is not a string without control characters"
    for field in _OPTIONAL_OBJECTS:
        if field in entry and not isinstance(entry[field], dict):
            return f"{shown(entry[key])}: its {field} is not an object"
    if "icons" in entry and not isinstance(entry["icons"], list):
        return f"{shown(entry[key])}: its icons is not an array"
    return _kind_problem(kind, entry, shown(entry[key]))


def _kind_problem(kind: str, entry: dict[str, Any], what: str) -> str | None:
    match kind:
        case "tools":
            for field in ("inputSchema", "outputSchema"):
                schema = entry.get(field)
                if (field == "inputSchema" or schema is not None) and not _object_schema(schema):
                    return f"{what}: its {field} is not a JSON Schema object of type 'object'"
        case "prompts":
            arguments = entry.get("arguments")
            if arguments is not None and not (
                isinstance(arguments, list)
                and all(isinstance(a, dict) and is_name(a.get("name")) for a in arguments)
            ):
                return f"{what}: its arguments are not objects with a name each"
        case "resources":
            size = entry.get("size")
            if size is not None and not (isinstance(size, int) and not isinstance(size, bool) and size >= 0):
                return f"{what}: its size is not a non-negative integer"
    return None


def _object_schema(schema: object) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"
