"""The discovery transform of one exposure: the tools a caller may see -> what its tools/list shows.

`direct`: the exposure as it is. `search`: the pinned tools, then search_tools, get_tool_schema and
call_tool. `auto`: search once the exposure's estimated tokens (compact JSON characters / 4) pass
`threshold_tokens`; never decided from clientInfo. A pure function of (exposure, settings): a route applies
it to its own view the same way.

The search tool's description names the exposure's backends with a one-line summary of what their tools
cover (the most frequent words of their tool names, verbs left out), so it follows every catalog change."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from actors.discovery.index import DEFAULT_RESULTS, MAX_QUERY_CHARS, MAX_RESULTS, backend_of
from actors.discovery.rows import clean, estimate_tokens
from actors.discovery.settings import DiscoveryMode, DiscoverySettings
from actors.discovery.words import STOPWORDS, VERBS, name_words

SEARCH_TOOLS: Final = "search_tools"
GET_TOOL_SCHEMA: Final = "get_tool_schema"
CALL_TOOL: Final = "call_tool"
META_TOOLS: Final = frozenset({SEARCH_TOOLS, GET_TOOL_SCHEMA, CALL_TOOL})
MAX_SCHEMAS: Final = 5
MAX_BACKENDS_NAMED: Final = 16
TOPICS_PER_BACKEND: Final = 4
_NOT_TOPICS: Final = VERBS | STOPWORDS | {
    "a", "an", "the", "of", "to", "for", "by", "in", "on", "and", "or", "api", "mcp", "tool", "tools", "v1",
    "v2", "is", "with", "from", "id", "ids", "info", "details", "s",
}  # fmt: skip

Tool = dict[str, Any]


def searching(
    tools: Sequence[Tool], settings: DiscoverySettings, tokens: Callable[[], int] | None = None
) -> bool:
    """Whether this exposure is listed in search mode (`tokens`: its estimate, when known already)."""
    if settings.mode is DiscoveryMode.SEARCH:
        return True
    if settings.mode is not DiscoveryMode.AUTO:
        return False
    estimate = tokens() if tokens is not None else estimate_tokens(list(tools))
    return estimate > settings.threshold_tokens


def listing(
    tools: Sequence[Tool],
    settings: DiscoverySettings,
    covered: Callable[[], str],
    tokens: Callable[[], int] | None = None,
) -> tuple[Tool, ...]:
    """What tools/list shows of `tools` (`covered`: the summary of their backends, asked only in search
    mode)."""
    if not searching(tools, settings, tokens):
        return tuple(tools)
    pinned = set(settings.pin)
    pins = tuple(tool for tool in tools if tool.get("name") in pinned and tool.get("name") not in META_TOOLS)
    return (*pins, *meta_tools(covered()))


def summary(tools: Iterable[Tool], backends: Mapping[str, str]) -> str:
    """`github (26 tools: pull, request, issue, file); slack (8 tools: channel, message, ...)`."""
    words: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for tool in tools:
        name = str(tool.get("name", ""))
        backend = backends.get(name) or backend_of(name) or "gateway"
        counts[backend] += 1
        own = name.partition("__")[2] or name
        skip = set(name_words(backend))
        topics = words.setdefault(backend, Counter())
        topics.update(
            w for w in dict.fromkeys(name_words(own)) if w not in _NOT_TOPICS and w not in skip and len(w) > 1
        )
    parts = []
    for backend, count in list(counts.items())[:MAX_BACKENDS_NAMED]:
        topics = [word for word, _ in words[backend].most_common(TOPICS_PER_BACKEND)]
        covered = f": {', '.join(topics)}" if topics else ""
        parts.append(f"{clean(backend, 40)} ({count} tool{'s' if count != 1 else ''}{covered})")
    if len(counts) > MAX_BACKENDS_NAMED:
        parts.append(f"and {len(counts) - MAX_BACKENDS_NAMED} more backends")
    return "; ".join(parts) if parts else "no tools"


def meta_tools(covered: str) -> tuple[Tool, Tool, Tool]:
    search = {
        "name": SEARCH_TOOLS,
        "description": (
            "Find tools by task in words; returns name, signature (* = required) and summary. "
            f"Covers: {covered}."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "default": DEFAULT_RESULTS,
                },
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True},
    }
    schema = {
        "name": GET_TOOL_SCHEMA,
        "description": f"Full definitions (input schemas) of up to {MAX_SCHEMAS} tools by name.",
        "inputSchema": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_SCHEMAS}},
            "required": ["names"],
        },
        "annotations": {"readOnlyHint": True},
    }
    call = {
        "name": CALL_TOOL,
        "description": "Call a tool found by search_tools with its arguments.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
    }
    return search, schema, call
