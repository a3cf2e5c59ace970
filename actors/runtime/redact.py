"""The redactor: the one place that knows every secret value the gateway holds, and takes those values (and
text shaped like a credential, whatever its value) out of what the gateway is about to keep or show: a log
line, an audit record, an admin page, a span, an error a client is sent, a backend's stderr line.

What it looks for:
- known values, in groups the owner of each replaces whole (`know`): the secrets the config resolved, the
  OTLP exporter's header values. A value shorter than MIN_CHARS is not looked for: too many false hits
  (`mcp-gateway check` warns of such a secret). A value a group no longer holds is kept (RETIRED_MAX of
  them): a credential that was replaced may still be valid somewhere.
- minted values (`mint`): tokens the gateway obtains at run time, each known at least until it expires,
  at most MINTED_MAX at once (when full, the expired ones leave, then the one expiring first). Adding
  one must cost nothing on the path that mints it, so they are not in the automaton: each run of
  token68 characters (RFC 6750) at least MINTED_KEY_CHARS long is looked up by its last ones (a JWT's:
  its signature), and a run that ends as a minted token does is replaced up to there.
- shapes (SHAPES): a JWT, a bearer token, GitHub and Slack tokens, an AWS access key id, a PEM block.

How: one Aho-Corasick automaton (pyahocorasick, in C) holds every known value (and its JSON-escaped form,
for what is searched as JSON text) and the literal start of each shape. A text it finds nothing in is
returned as it is, after one pass (about 1 us for a log line, whatever the number of values): that is the
cost on every sink when nothing matches; while tokens are minted, one more pass (a regular expression of
one character class) looks for runs to look up. Where something is found, the spans are replaced by a
marker naming what was there (`[REDACTED:env:API_TOKEN]`, `[REDACTED:jwt]`), never any of its characters.

The automaton is rebuilt when what is known changes (a load, a reload), at the next lookup, under a lock,
and swapped whole: a reader in another thread (the OTLP exporter's) sees the old one or the
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

MIN_CHARS: Final = 8  # a shorter value is not looked for: it would be found in too much that is not it
RETIRED_MAX: Final = 256  # values a group no longer holds, still looked for (a reload's old secrets)
MINTED_MAX: Final = 4096  # tokens minted at run time known at once: one per (caller, backend) in use
MINTED_KEY_CHARS: Final = 32  # a minted token is found by its last characters (a JWT's: its signature)
TRAILING_CHARS: Final = 3  # token characters a minted token may be followed by in its run: "TOKEN." "TOKEN=="
_RUN: Final = re.compile(  # where a minted token may be: a run of token characters at least its key long
    f"[A-Za-z0-9._~+/=-]{{{MINTED_KEY_CHARS},}}"
)  # a token-shaped run: where a minted one may be
LABEL_CHARS: Final = 80  # a marker's label is cut here
MARKER: Final = "[REDACTED:{}]"
_LABEL_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.:/@+-]")

# The shapes of credentials, by name (the marker's label). No pattern can match a double quote, so a match
# in JSON text never spans two strings, and a redacted JSON document is still JSON.
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
    """What the automaton found: a known value (whole), or a shape's start."""

    value: str  # the whole value ("" for a shape's start)
    label: str  # the value's label, or the shape's name


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
        self._minted_keys: dict[str, str] = {}  # a token's last MINTED_KEY_CHARS -> the token
        self._minted_short: dict[str, str] = {}  # token -> label: shorter than a key, in the automaton
        self._lock = threading.Lock()
        self._dirty = True
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
        """A token obtained at run time, looked for at least until `expires_at` (wall clock, time.time()).
        At MINTED_MAX, the tokens that expired leave, then the one that expires first. Costs no rebuild
        (unless the token is shorter than MINTED_KEY_CHARS)."""
        if len(value) < MIN_CHARS:
            return
        with self._lock:
            if value not in self._minted and len(self._minted) >= self._minted_max:
                now = self._clock()
                for token in [token for token, (_, until) in self._minted.items() if until <= now]:
                    self._forget(token)
                if len(self._minted) >= self._minted_max:
                    self._forget(min(self._minted, key=lambda token: self._minted[token][1]))
            self._minted[value] = (label, expires_at)
            if len(value) >= MINTED_KEY_CHARS:
                self._minted_keys[value[-MINTED_KEY_CHARS:]] = value
            else:  # rare (OAuth tokens are long): looked for whole, as a known value is
                self._minted_short[value] = label
                self._dirty = True

    def _forget(self, token: str) -> None:
        del self._minted[token]
        if self._minted_keys.get(token[-MINTED_KEY_CHARS:]) == token:
            del self._minted_keys[token[-MINTED_KEY_CHARS:]]
        if self._minted_short.pop(token, None) is not None:
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
        """`text` with every known value, minted token and shape replaced by its marker; `text` itself when
        it holds none."""
        automaton = self._current()
        if not text:
            return text
        hits = list(automaton.iter(text)) if automaton is not None else []
        if not hits and not self._minted_keys:
            return text  # the common case: one pass of the automaton, nothing found
        spans, shapes = _spans(hits)
        if self._minted_keys:
            spans += self._minted_spans(text)
        if spans:
            text = _replaced(text, spans)
        for shape in (name for name in SHAPES if name in shapes):  # in SHAPES' order: the same text each time
            text = _SHAPES[shape].sub(SHAPE_MARKERS[shape], text)
        return text

    def _minted_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Each token-shaped run of `text` that holds a minted token's end (the whole token, or its end after
        a cut), at the run's end or up to TRAILING_CHARS before it (a full stop, a padding): the run up to
        the token's end."""
        keys, minted, spans = self._minted_keys, self._minted, []
        for run in _RUN.finditer(text):
            found = run.group()
            for end in range(len(found), max(len(found) - TRAILING_CHARS, MINTED_KEY_CHARS) - 1, -1):
                token = keys.get(found[end - MINTED_KEY_CHARS : end])
                held = minted.get(token) if token is not None else None  # None: gone in another thread
                if held is not None:
                    spans.append((run.start(), run.start() + end, held[0]))
                    break
        return spans

    def redact_all(self, texts: list[str]) -> list[str]:
        """Each of `texts` redacted, in one pass when none holds a NUL (no value, shape or token can span
        one: they are joined by it, then split)."""
        if any("\0" in text for text in texts):
            return [self.redact(text) for text in texts]
        joined = "\0".join(texts)
        clean = self.redact(joined)
        return texts if clean is joined else clean.split("\0")

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
        for text in texts:
            for _, keys in automaton.iter(text) if automaton is not None else ():
                for key in keys:
                    if key.value:
                        return key.label
            if self._minted_keys and (spans := self._minted_spans(text)):
                return spans[0][2]
        return None

    # --- the automaton -----------------------------------------------------------------------------------

    def _current(self) -> Any:
        if self._dirty:
            with self._lock:
                if self._dirty:
                    self._automaton = self._build()
                    self._dirty = False
        return self._automaton

    def _build(self) -> Any:
        """A new automaton of the known values and the shapes' starts (called under the lock)."""
        keys: dict[str, list[_Key]] = {}
        for value, label in [*_whole_values(self._groups, self._retired), *self._minted_short.items()]:
            for form in {value, json_form(value)}:
                keys.setdefault(form, []).append(_Key(form, label))
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


def _spans(hits: list[tuple[int, tuple[_Key, ...]]]) -> tuple[list[tuple[int, int, str]], set[str]]:
    """The (start, end, label) spans of the known values hit, and the shapes whose start was hit."""
    spans, shapes = [], set()
    for end, keys in hits:
        for key in keys:
            if key.value:
                spans.append((end + 1 - len(key.value), end + 1, key.label))
            else:
                shapes.add(key.label)
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
