"""The poisoning scan: what in a tool's, prompt's or template's definition is addressed to the model rather
than to the user, or hides from the user what the model reads.

Every string of the definition is read, keys included (a property name can carry hidden characters too):
- hidden characters: zero-width, bidirectional controls, Unicode tag characters, variation selectors of
  the supplementary plane (ASCII smuggling), and other control characters;
- HTML comments (`<!-- ... -->`: invisible where a client renders Markdown);
- phrases addressed to the model ("ignore previous instructions", "do not tell the user", ...);
- sensitive paths (`~/.ssh`, `.env`, key and credential files, keychains);
- URLs with data embedded (placeholders to be filled, credentials, long query values, data: URIs).

Pure and bounded: at most MAX_FINDINGS findings of at most EXCERPT_CHARS each, and the text searched is
the definition's strings joined, so each pattern runs once over a definition, not once per string.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any, Final

import attrs

MAX_FINDINGS: Final = 32  # per definition: enough to judge it, a bounded record
EXCERPT_CHARS: Final = 80  # of the text around a finding, hidden characters written as \uXXXX
MAX_SCAN_CHARS: Final = 1 << 20  # of a definition's strings: a bigger definition is held as too large anyway
SEPARATOR: Final = "\n\n"  # between two strings: no pattern spans it

HIDDEN: Final = re.compile(
    "[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\u061c\u180e\ufeff\u00ad"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]+"
)
CONTROLS: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
HTML_COMMENT: Final = re.compile(r"<!--")
PHRASES: Final = re.compile(
    r"ignore[ \t]+(?:all[ \t]+)?(?:the[ \t]+)?(?:previous|prior|above|earlier|other)[ \t]+"
    r"(?:instructions?|prompts?|rules?|directions?)"
    r"|disregard[ \t]+(?:all[ \t]+|any[ \t]+)?(?:the[ \t]+)?(?:previous|prior|above|earlier|system)"
    r"|(?:do[ \t]+not|don'?t|never)[ \t]+(?:tell|inform|mention|reveal|show|alert)[ \t]+"
    r"(?:this[ \t]+|it[ \t]+|anything[ \t]+)?(?:to[ \t]+)?the[ \t]+user"
    r"|without[ \t]+(?:telling|informing|asking|notifying|alerting)[ \t]+the[ \t]+user"
    r"|the[ \t]+user[ \t]+(?:must|should|may)[ \t]+not[ \t]+(?:know|see|notice|be[ \t]+told)"
    r"|(?:before|prior[ \t]+to)[ \t]+(?:using|calling|invoking)[ \t]+(?:this|any|the)[ \t]+"
    r"(?:other[ \t]+)?tools?[ \t,]+(?:you[ \t]+)?(?:must|should|always)"
    r"|<[ \t]*/?[ \t]*(?:important|system|instructions?|secret)[ \t]*>"
    r"|\[[ \t]*(?:system|instructions?)[ \t]*\]"
    r"|(?:new|updated|override)[ \t]+(?:system[ \t]+)?instructions[ \t]*:"
    r"|you[ \t]+are[ \t]+now[ \t]+(?:a|an|in)[ \t]"
    r"|(?:this|these)[ \t]+instructions?[ \t]+(?:is|are)[ \t]+(?:very[ \t]+)?(?:important|mandatory)",
    re.IGNORECASE,
)
PATHS: Final = re.compile(
    r"~?/?\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|(?:^|[\s/'\"`(~=])\.env(?:\.[\w-]+)?\b"
    r"|\.aws/credentials|\.netrc\b|\.npmrc\b|\.pgpass\b|\.git-credentials\b|\.kube/config"
    r"|\.docker/config\.json|\bkeychains?\b|\bsecurity[ \t]+find-(?:generic|internet)-password"
    r"|/etc/(?:passwd|shadow)\b|\.gnupg\b|\bmcp\.json\b|\.config/gcloud|\bcredentials\.json\b",
    re.IGNORECASE,
)
URLS: Final = re.compile(r"\b(?:https?|wss?|ftp)://[^\s\"'<>`)\]]+|\bdata:[\w/+.-]+;base64,", re.IGNORECASE)
EMBEDDED: Final = re.compile(
    r"\{\{?[^}\s]{1,64}\}\}?|\$\{?[A-Za-z_]\w*|<[A-Za-z_][\w-]{0,63}>|%[A-Za-z_]\w*%"  # placeholders
    r"|^[a-z]+://[^/?#@\s]+:[^/?#@\s]*@"  # user:password@
    r"|[?&][^=&#]{1,64}=[^&#]{40,}"  # a long query value
    r"|^data:",
    re.IGNORECASE,
)


# Where each alternative of PHRASES begins (lowercase): it is tried only where one of these is.
PHRASE_STARTS: Final = (
    "ignore", "disregard", "do", "never", "without", "the user", "before", "prior", "<", "[", "new",
    "updated", "override", "you are now", "this", "these",
)  # fmt: skip
# What PATHS and URLS cannot match without: only the text around these is searched.
AROUND: Final = (
    (
        "sensitive-path",
        PATHS,
        (".ssh", "id_", ".env", ".aws", ".netrc", ".npmrc", ".pgpass", ".git-credentials", ".kube",
         ".docker", "keychain", "find-", "/etc/", ".gnupg", "mcp.json", "gcloud", "credentials.json"),
    ),
    ("url-data", URLS, ("://", "data:")),
)  # fmt: skip
WINDOW_MARGIN: Final = 160  # characters searched either side of a trigger: longer than any path or URL start
MAX_WINDOW_CHARS: Final = 128 * 1024  # searched per pattern at most (a flood of triggers: a bounded cost)
MAX_TRIGGERS: Final = 4096  # trigger positions tried per word at most


@attrs.frozen(slots=True)
class Finding:
    kind: str  # hidden, control, html-comment, instruction, sensitive-path, url-data, too-large
    where: str  # the field, as a path: inputSchema.properties.path.description
    excerpt: str  # the text around it, hidden and control characters written as \uXXXX

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "where": self.where, "excerpt": self.excerpt}

    @classmethod
    def of(cls, raw: object) -> Finding | None:
        """A finding as stored (as_json), or None when it is not one."""
        if not isinstance(raw, dict):
            return None
        fields = [raw.get(name) for name in ("kind", "where", "excerpt")]
        if not all(isinstance(field, str) for field in fields):
            return None
        kind, where, excerpt = (str(field)[:256] for field in fields)
        return cls(kind, where, excerpt)


def reveal(text: str) -> str:
    """`text` with hidden and control characters (newlines too) written as \\uXXXX: what a reviewer must
    see and a terminal would not show."""
    return _REVEAL.sub(_escaped, text)


_REVEAL: Final = re.compile(f"{HIDDEN.pattern[:-1]}|{CONTROLS.pattern[:-1]}|[\n\r\t\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def scan(definition: dict[str, Any]) -> tuple[Finding, ...]:
    """What the definition holds that a reviewer should see, in the order found, at most MAX_FINDINGS."""
    paths, starts, text = _strings(definition)
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()

    def found(kind: str, start: int, end: int) -> None:
        index = bisect_right(starts, start) - 1
        if (kind, index) in seen or len(findings) >= MAX_FINDINGS:
            return  # one finding of each kind per string: what a reviewer needs to look at
        seen.add((kind, index))
        where = _shown(paths[index]) if index >= 0 else ""
        field_start = starts[index] if index >= 0 else 0
        field_end = text.find(SEPARATOR, field_start)
        field_end = len(text) if field_end < 0 else field_end
        around = text[max(field_start, start - 24) : min(field_end, end + 40)]
        findings.append(Finding(kind, where, reveal(around)[:EXCERPT_CHARS]))

    for kind, pattern in (("hidden", HIDDEN), ("control", CONTROLS), ("html-comment", HTML_COMMENT)):
        for match in pattern.finditer(text):  # character classes and a literal: fast over any length
            found(kind, match.start(), match.end())
            if len(findings) >= MAX_FINDINGS:
                return tuple(findings)
    lower = text.lower()
    if len(lower) != len(text):  # a character whose lowercase is longer: positions would not line up
        lower = "".join(char if len(char.lower()) != 1 else char.lower() for char in text)
    for at in _positions(lower, PHRASE_STARTS):
        match = PHRASES.match(text, at)  # tried where a phrase can start: a few us each, not per character
        if match is not None:
            found("instruction", match.start(), match.end())
    for kind, pattern, triggers in AROUND:
        for start, end in _windows(_positions(lower, triggers), len(text)):
            for match in pattern.finditer(text, start, end):
                if kind != "url-data" or EMBEDDED.search(match.group(0)) is not None:
                    found(kind, match.start(), match.end())
        if len(findings) >= MAX_FINDINGS:
            break
    return tuple(findings)


def _positions(lower: str, triggers: tuple[str, ...]) -> list[int]:
    """Where each trigger is, in order (at most MAX_TRIGGERS of each)."""
    hits: list[int] = []
    for trigger in triggers:
        at, count = lower.find(trigger), 0
        while at >= 0 and count < MAX_TRIGGERS:
            hits.append(at)
            count += 1
            at = lower.find(trigger, at + 1)
    return sorted(hits)


def _windows(hits: list[int], size: int) -> list[tuple[int, int]]:
    """The stretches around `hits` (merged, at most MAX_WINDOW_CHARS in all) where a pattern that needs a
    trigger may match: its alternatives cost ~0.5 us per character tried, so a megabyte is read only where
    a trigger is."""
    windows: list[tuple[int, int]] = []
    total = 0
    for at in hits:
        start, end = max(at - WINDOW_MARGIN, 0), min(at + WINDOW_MARGIN, size)
        if windows and start <= windows[-1][1]:
            total += max(end - windows[-1][1], 0)
            windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
        else:
            total += end - start
            windows.append((start, end))
        if total >= MAX_WINDOW_CHARS:
            break
    return windows


Path = tuple[Any, str] | None  # (parent, segment): built into text only for a finding
MAX_PATH_CHARS: Final = 200


def _shown(path: Path) -> str:
    """A field's path as text (its last MAX_PATH_CHARS characters): inputSchema.properties.x.description."""
    segments: list[str] = []
    size = 0
    while path is not None and size < MAX_PATH_CHARS:
        path, segment = path
        segments.append(segment)
        size += len(segment)
    shown = "".join(reversed(segments)).removeprefix(".")
    return reveal(shown[-MAX_PATH_CHARS:])


def _strings(definition: dict[str, Any]) -> tuple[list[Path], list[int], str]:
    """Every string of the definition (keys too) joined by SEPARATOR, with each one's path and start."""
    paths: list[Path] = []
    starts: list[int] = []
    parts: list[str] = []
    size = 0
    for path, value in _walk(definition):
        if size >= MAX_SCAN_CHARS:
            break
        value = value.replace(SEPARATOR, "\n")[: MAX_SCAN_CHARS - size]
        paths.append(path)
        starts.append(size)
        parts.append(value)
        size += len(value) + len(SEPARATOR)
    return paths, starts, SEPARATOR.join(parts)


def _walk(value: Any) -> Iterator[tuple[Path, str]]:
    """(path, string) for each string in `value`, keys included; iterative, so no depth is too deep, and
    each path shares its parent's, so a deep definition costs no more memory than its size."""
    stack: list[tuple[Path, Any]] = [(None, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            yield path, item
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                inner_path = (path, f".{key}")
                yield inner_path, str(key)
                stack.append((inner_path, inner))
        elif isinstance(item, list):
            for index in range(len(item) - 1, -1, -1):
                stack.append(((path, f"[{index}]"), item[index]))
