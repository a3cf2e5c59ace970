"""A definition (a tool, a prompt or a resource template a backend lists) and its fingerprint: the digest of
its canonical form, the digest of its body (all but its name, so a rename is recognised), the text a
reviewer reads, and what the scan found in it.

The canonical form is RFC 8785 (JSON Canonicalization Scheme, by the `rfc8785` library) of the fields
that say what the definition does and tells the model, and nothing else (so a backend's new icon is no
change): for a tool its name, title, description, inputSchema, outputSchema and annotations; for a prompt
its name, title, description and arguments; for a template its uriTemplate, name, title, description,
mimeType and annotations; for each, the `_meta` entries of MCP Apps' UI (`ui`, `ui/...`,
`io.modelcontextprotocol/ui`). Each top-level value is canonicalized once, and the whole form and the body
are joined from those pieces as RFC 8785 orders an object's members, so the two digests cost one pass.

An integer beyond I-JSON's range (which RFC 8785 refuses and a 64-bit schema bound may hold) is written as
{"$integer": "<digits>"}. A definition whose selected fields take more than MAX_CANONICAL_BYTES as JSON is
not canonicalized (the pure-Python scheme takes ~100 ms per MB): its digest is that of its bytes as orjson
writes them with sorted keys, and its finding `too-large` says so (under trust = "scan" it is held).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import orjson
import rfc8785

from actors.trust.scan import Finding, reveal, scan

Kind = Literal["tool", "prompt", "template"]
KINDS: Final[tuple[Kind, ...]] = ("tool", "prompt", "template")
KIND_OF_LIST: Final[Mapping[str, Kind]] = {"tools": "tool", "prompts": "prompt", "templates": "template"}
KEY_FIELD: Final[Mapping[Kind, str]] = {"tool": "name", "prompt": "name", "template": "uriTemplate"}
FIELDS: Final[Mapping[Kind, tuple[str, ...]]] = {
    "tool": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompt": ("name", "title", "description", "arguments"),
    "template": ("uriTemplate", "name", "title", "description", "mimeType", "annotations"),
}
UI_META: Final = ("ui", "io.modelcontextprotocol/ui")  # and every key under "ui/" (the flat, older form)
MAX_CANONICAL_BYTES: Final = 256 * 1024  # ~25 ms to canonicalize: held as too large past it
MAX_TEXT_CHARS: Final = 64 * 1024  # of the text kept for review (the digest is of the whole)
I_JSON_MAX: Final = 2**53 - 1


@attrs.frozen(slots=True, order=True)
class DefinitionKey:
    """Which definition: its backend, its kind and its own name (a template's own uriTemplate), as the
    backend lists it, before any rename of [backends.tools]."""

    backend: str
    kind: Kind
    name: str

    @property
    def shown(self) -> str:
        """BACKEND/NAME: what `mcp-gateway trust` takes (a backend's name has no '/')."""
        return f"{self.backend}/{self.name}"

    def as_json(self) -> dict[str, str]:
        return {"backend": self.backend, "kind": self.kind, "name": self.name, "id": self.shown}


@attrs.frozen(slots=True, eq=False)
class Fingerprint:
    digest: str  # SHA-256 (hex) of the canonical form
    body: str  # SHA-256 of the canonical form without its name (a template's: without its uriTemplate)
    findings: tuple[Finding, ...]
    definition: dict[str, Any] = attrs.field(repr=False)  # the selected fields, for the text when needed

    def text(self) -> str:
        """What a reviewer reads: the selected fields as indented JSON with sorted keys, hidden and control
        characters written as \\uXXXX, cut to MAX_TEXT_CHARS."""
        return reviewable(self.definition)


def selected(kind: Kind, item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `item` its digest covers."""
    chosen = {field: item[field] for field in FIELDS[kind] if field in item}
    meta = item.get("_meta")
    if isinstance(meta, dict):
        ui = {key: value for key, value in meta.items() if key in UI_META or key.startswith("ui/")}
        if ui:
            chosen["_meta"] = ui
    return chosen


def fingerprint(kind: Kind, item: Mapping[str, Any]) -> Fingerprint:
    """The digests, the findings and the reviewable form of one listed definition."""
    chosen = selected(kind, item)
    raw = orjson.dumps(chosen, option=orjson.OPT_SORT_KEYS)
    key = KEY_FIELD[kind]
    if len(raw) > MAX_CANONICAL_BYTES:
        body = orjson.dumps({k: v for k, v in chosen.items() if k != key}, option=orjson.OPT_SORT_KEYS)
        too_large = Finding("too-large", "", f"{len(raw)} bytes, more than {MAX_CANONICAL_BYTES}")
        return Fingerprint(
            _sha(b"orjson:" + raw), _sha(b"orjson:" + body), (too_large, *scan(chosen)), chosen
        )
    members = {name: _canonical(value) for name, value in chosen.items()}
    whole = _object(members)
    body = _object({name: value for name, value in members.items() if name != key})
    return Fingerprint(_sha(whole), _sha(body), scan(chosen), chosen)


def reviewable(definition: Mapping[str, Any]) -> str:
    text = orjson.dumps(definition, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()
    text = reveal_in_json(text)
    if len(text) > MAX_TEXT_CHARS:
        return text[:MAX_TEXT_CHARS] + f"\n... ({len(text) - MAX_TEXT_CHARS} more characters not kept)"
    return text


def reveal_in_json(text: str) -> str:
    """Indented JSON with the hidden characters inside its strings written as \\uXXXX (its own newlines
    kept: orjson escapes those inside strings itself)."""
    return "\n".join(reveal(line) for line in text.split("\n"))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _object(members: Mapping[str, bytes]) -> bytes:
    """An object's RFC 8785 form from its members' canonical values: members sorted by their names' UTF-16
    code units, as the scheme orders them."""
    ordered = sorted(members, key=lambda name: name.encode("utf-16-be"))
    return b"{" + b",".join(rfc8785.dumps(name) + b":" + members[name] for name in ordered) + b"}"


def _canonical(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        return rfc8785.dumps(_within_i_json(value))


def _within_i_json(value: Any) -> Any:
    """`value` with each integer beyond I-JSON's range written as {"$integer": "<digits>"}."""
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return value if -I_JSON_MAX <= value <= I_JSON_MAX else {"$integer": str(value)}
    if isinstance(value, dict):
        return {key: _within_i_json(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_within_i_json(inner) for inner in value]
    return value
