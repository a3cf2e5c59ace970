"""The redactor: the one place that knows every secret value the gateway holds, and takes those values (and
text shaped like a credential, whatever its value) out of what the gateway is about to keep or show: a log
line, an audit record, an admin page, a span, an error a client is sent, a backend's stderr line.

What it looks for:
- known values, in groups the owner of each replaces whole (`know`): the secrets the config resolved, the
  OTLP exporter's header values. A value shorter than MIN_CHARS is not looked for: too many false hits
  (`mcp-gateway check` warns of such a secret). A value a group no longer holds is kept (RETIRED_MAX of
  them): a credential that was replaced may still be valid somewhere.
- minted values (`mint`): tokens the gateway obtains at run time, each known until it expires, at most
  MINTED_MAX at once (the one expiring first leaves to make room). Only their last MINTED_KEY_CHARS are
  looked for, and a hit is widened back as far as the text agrees with the token: 4,096 JWTs of 1 KB would
  otherwise be 4 MB of patterns.
- shapes (SHAPES): a JWT, a bearer token, GitHub and Slack tokens, an AWS access key id, a PEM block.

How: one Aho-Corasick automaton (pyahocorasick, in C) holds every known value (and its JSON-escaped form,
for what is searched as JSON text) and the literal start of each shape. A text it finds nothing in is
returned as it is, after one pass (about 1 us for a log line, whatever the number of values): that is the
cost on every sink when nothing matches. Where it finds something, the spans are replaced by a marker
naming what was there (`[REDACTED:env:API_TOKEN]`, `[REDACTED:jwt]`), never any of its characters.

The automaton is rebuilt when what is known changes (a load, a reload, a token minted), at the next lookup,
under a lock, and swapped whole: a reader in another thread (the OTLP exporter's) sees the old one or the
new one. The runtime layer knows no MCP and no config: its owners hand it label -> value pairs.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import ahocorasick
import attrs
import orjson

MIN_CHARS: Final = 8  # a shorter value is not looked for: "password" may be one, but so is every "12345678"?
RETIRED_MAX: Final = 256  # values a group no longer holds, still looked for (a reload's old secrets)
MINTED_MAX: Final = 4096  # tokens minted at run time known at once: one per (caller, backend) in use
MINTED_KEY_CHARS: Final = 32  # a minted token is found by its last characters (a JWT's: its signature)
LABEL_CHARS: Final = 80  # a marker's label is cut here
MARKER: Final = "[REDACTED:{}]"
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.:/@+-]")

# The shapes of credentials, each a named group (its name is the marker's label). No pattern can match a
# double quote or a line break written as JSON writes it inside a string, so a match in JSON text never
# spans two strings, and a redacted JSON document is still JSON.
_TOKEN68: Final = r"[A-Za-z0-9._~+/-]"
SHAPES: Final[Mapping[str, str]] = {
    "jwt": r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
    # RFC 6750's token68 after the scheme; not an auth-param of a challenge (realm=, error=, ...)
    "bearer": r"(?i:\bbearer)[ \t]+(?!(?:realm|scope|error(?:_description|_uri)?|resource_metadata)=)"
    rf"{_TOKEN68}{{8,}}=*",
    "github": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    "slack": r"\bxox[a-z]-[A-Za-z0-9-]{10,}",
    "aws": r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
    # its end line, or as far as PEM text goes (a block cut short by a line's cap)
    "pem": r"-----BEGIN [A-Z0-9 ]{1,40}-----[A-Za-z0-9+/=\s\\:,._-]*?"
    r"(?:-----END [A-Z0-9 ]{1,40}-----|(?![A-Za-z0-9+/=\s\\:,._-]))",
}
# What each shape starts with, literally: the automaton looks for these, and a text holding one is searched
# with that shape's expression alone.
SHAPE_STARTS: Final[Mapping[str, str]] = {
    "eyJ": "jwt",
    "earer": "bearer",
    "EARER": "bearer",
    **{f"gh{kind}_": "github" for kind in "pousr"},
    "github_pat_": "github",
    "xox": "slack",
    "AKIA": "aws",
    "ASIA": "aws",
    "-----BEGIN ": "pem",
}
_SHAPES: Final = {name: re.compile(pattern) for name, pattern in SHAPES.items()}


def marker(label: str) -> str:
    """What stands in for a redacted span: the label of what was there, with nothing of its value."""
    return MARKER.format(_LABEL_UNSAFE.sub("_", label[:LABEL_CHARS]))


def _bearer(match: re.Match[str]) -> str:
    """A bearer token keeps its scheme word, so the line still says what it was."""
    return f"{match.group().split(None, 1)[0]} {marker('bearer')}"


SHAPE_MARKERS: Final[Mapping[str, str | Callable[[re.Match[str]], str]]] = {
    name: _bearer if name == "bearer" else marker(name) for name in SHAPES
}


def json_form(value: str) -> str:
    """How `value` is written inside a JSON string (orjson's escapes): the text a JSON sink searches."""
    return orjson.dumps(value).decode()[1:-1]


@attrs.frozen(slots=True)
class _Key:
    """What the automaton found: a known value (whole), or a minted one by its tail, or a shape's start."""

    value: str  # the whole value ("" for a shape's start)
    label: str  # the value's label, or the shape's name
    tail: bool = False  # found by its last characters: widened back as far as the text agrees


class Redactor:
    """Owns: the known and minted values, and the automaton built from them (rebuilt when they change).
    Receives: `know` (a group's values, replaced whole), `mint` (one token until it expires).
    Sends: nothing; `redact` answers text, `known_in` names a known value a text holds.
    Stops when: never; it lives with the process.
    Errors: none; a value it is handed is never in anything it raises or logs.
    """

    def __init__(
        self,
        *,
        shapes: bool = True,
        clock: Callable[[], float] = time.time,
        minted_max: int = MINTED_MAX,
    ) -> None:
        self._shapes = shapes
        self._clock = clock  # wall-clock seconds, as a token's expiry is said
        self._minted_max = minted_max
        self._groups: dict[str, dict[str, str]] = {}  # group -> value -> label
        self._retired: dict[str, str] = {}  # value -> label, oldest first
        self._minted: dict[str, tuple[str, float]] = {}  # token -> (label, expires_at)
        self._lock = threading.Lock()
        self._dirty = True
        self._soonest = float("inf")  # the first minted expiry: past it, the next lookup rebuilds
        self._automaton: Any = None  # ahocorasick.Automaton, never changed once built; None: nothing to find

    # --- what it knows ------------------------------------------------------------------------------------

    def know(self, group: str, values: Mapping[str, str]) -> None:
        """The values of `group` (label -> value) are now these: the group's others are retired."""
        fresh = {value: label for label, value in values.items() if len(value) >= MIN_CHARS}
        with self._lock:
            for value, label in self._groups.get(group, {}).items():
                if value not in fresh:
                    self._retired.pop(value, None)
                    self._retired[value] = label
            for value in fresh:
                self._retired.pop(value, None)
            while len(self._retired) > RETIRED_MAX:
                del self._retired[next(iter(self._retired))]
            self._groups[group] = fresh
            self._dirty = True

    def mint(self, label: str, value: str, expires_at: float) -> None:
        """A token obtained at run time, looked for until `expires_at` (wall clock, time.time()). Past
        MINTED_MAX, the token that expires first is forgotten to make room."""
        if len(value) < MIN_CHARS:
            return
        with self._lock:
            self._minted[value] = (label, expires_at)
            if len(self._minted) > self._minted_max:
                first = min(self._minted, key=lambda token: self._minted[token][1])
                del self._minted[first]
            self._soonest = min(self._soonest, expires_at)
            self._dirty = True

    @property
    def known(self) -> int:
        """How many values it looks for now (known, retired and minted; escaped forms not counted)."""
        with self._lock:
            return len(
                {value for group in self._groups.values() for value in group} | set(self._retired)
            ) + len(self._minted)

    # --- looking ------------------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """`text` with every known value and every shape replaced by its marker; `text` itself when it
        holds none (one pass of the automaton)."""
        automaton = self._current()
        if automaton is None or not text:
            return text
        hits = list(automaton.iter(text))
        if not hits:
            return text
        spans, shapes = _spans(text, hits)
        if spans:
            text = _replaced(text, spans)
        for shape in (name for name in SHAPES if name in shapes):  # in SHAPES' order: the same text each time
            text = _SHAPES[shape].sub(SHAPE_MARKERS[shape], text)
        return text

    def redact_json(self, value: Any) -> Any:
        """A JSON value with every string in it (keys too) redacted; the same object when nothing was."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            items = [self.redact_json(item) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, dict):
            pairs = [
                (self.redact(k) if isinstance(k, str) else k, self.redact_json(v)) for k, v in value.items()
            ]
            same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
            return value if same else dict(pairs)
        return value

    def known_in(self, texts: Iterable[str]) -> str | None:
        """The label of a known (or minted) value one of `texts` holds, or None; shapes are not looked for."""
        automaton = self._current()
        if automaton is None:
            return None
        for text in texts:
            for _, keys in automaton.iter(text):
                for key in keys:
                    if key.value:
                        return key.label
        return None

    # --- the automaton -----------------------------------------------------------------------------------

    def _current(self) -> Any:
        if self._dirty or (self._minted and self._clock() >= self._soonest):
            with self._lock:
                if self._dirty or (self._minted and self._clock() >= self._soonest):
                    self._automaton = self._build()
                    self._dirty = False
        return self._automaton

    def _build(self) -> Any:
        """A new automaton of what is known now (called under the lock); expired tokens are dropped."""
        now = self._clock()
        self._minted = {token: held for token, held in self._minted.items() if held[1] > now}
        self._soonest = min((held[1] for held in self._minted.values()), default=float("inf"))
        keys: dict[str, list[_Key]] = {}
        for value, label in _whole_values(self._groups, self._retired):
            for form in {value, json_form(value)}:
                keys.setdefault(form, []).append(_Key(form, label))
        for token, (label, _) in self._minted.items():
            keys.setdefault(token[-MINTED_KEY_CHARS:], []).append(_Key(token, label, tail=True))
        if self._shapes:
            for start, shape in SHAPE_STARTS.items():
                keys.setdefault(start, []).append(_Key("", shape))
        if not keys:
            return None
        automaton = ahocorasick.Automaton()
        for word, found in keys.items():
            automaton.add_word(word, tuple(found))
        automaton.make_automaton()
        return automaton


def _whole_values(
    groups: Mapping[str, Mapping[str, str]], retired: Mapping[str, str]
) -> list[tuple[str, str]]:
    current = [(value, label) for group in groups.values() for value, label in group.items()]
    held = {value for value, _ in current}
    return current + [(value, label) for value, label in retired.items() if value not in held]


def _widened(text: str, end: int, key: _Key) -> tuple[int, int]:
    """A minted token found by its tail ending at `end` (inclusive): its span's start, and its length in
    the text (the whole token, or as much of it as precedes the tail unchanged)."""
    value = key.value
    start = end + 1 - len(value)
    if start >= 0 and text.startswith(value, start):
        return start, len(value)
    length = 0
    while length < len(value) and end - length >= 0 and text[end - length] == value[-1 - length]:
        length += 1
    return end + 1 - length, length


def _spans(
    text: str, hits: list[tuple[int, tuple[_Key, ...]]]
) -> tuple[list[tuple[int, int, str]], set[str]]:
    """The (start, end, label) spans of the known values hit, and the shapes whose start was hit."""
    spans, shapes = [], set()
    for end, keys in hits:
        for key in keys:
            if not key.value:
                shapes.add(key.label)
            elif key.tail:
                start, length = _widened(text, end, key)
                spans.append((start, start + length, key.label))
            else:
                spans.append((end + 1 - len(key.value), end + 1, key.label))
    return spans, shapes


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    """`text` with each span (overlapping ones merged, the first one's label kept) replaced by its marker."""
    spans.sort(key=lambda span: (span[0], -span[1]))
    parts, at = [], 0
    merged: list[list[Any]] = []
    for start, end, label in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    for start, end, label in merged:
        parts += (text[at:start], marker(label))
        at = end
    parts.append(text[at:])
    return "".join(parts)


REDACTOR: Final = Redactor()  # the process's own: the root tells it the config's secrets at load and reload


def redact(text: str) -> str:
    """`text` with what the process's redactor knows (and every credential shape) taken out."""
    return REDACTOR.redact(text)
