"""The search index of one exposure: an in-memory SQLite FTS5 table ranked by BM25.

Columns: the name split into words (weight 4), the backend (2), the description (1), the parameters' names
(0.5); the porter stemmer. A query is turned into words, each word OR-ed with its verb synonyms, every term
quoted: nothing of FTS5's syntax (quotes, NEAR, column filters, `*`) passes from a query. Queries are
bounded in length and in words; limits are clamped. Built in ~3 ms for 210 tools, ~30 ms for 2,000; a query
on 2,000 tools takes ~1 ms.

An index is immutable once built and owned by whoever built it (one per exposure version); `close` frees it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol

from actors.discovery.words import STOPWORDS, name_words, text_words, with_synonyms

MAX_QUERY_CHARS: Final = 500
MAX_QUERY_WORDS: Final = 16
MAX_RESULTS: Final = 20
DEFAULT_RESULTS: Final = 5
_WEIGHTS: Final = (4.0, 2.0, 1.0, 0.5)

Tool = dict[str, Any]


def backend_of(name: str) -> str:
    """A public name's backend part when prefixed (`github__create_issue` -> github), else ''."""
    head, sep, _ = name.partition("__")
    return head if sep else ""


def clamp_limit(limit: object) -> int:
    """A client's `limit`: an int from 1 to MAX_RESULTS; anything else (huge, negative, a string) clamped
    or defaulted."""
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        return DEFAULT_RESULTS
    if limit != limit:  # NaN
        return DEFAULT_RESULTS
    return max(1, min(MAX_RESULTS, int(limit) if abs(limit) < 1e9 else MAX_RESULTS if limit > 0 else 1))


def fts_query(query: str) -> str:
    """The FTS5 MATCH expression for a task in words: each word (with its synonyms) quoted, OR-ed."""
    words = [word for word in text_words(query[:MAX_QUERY_CHARS]) if word not in STOPWORDS][:MAX_QUERY_WORDS]
    terms = {term for group in with_synonyms(words) for term in group}
    return " OR ".join(f'"{term}"' for term in sorted(terms))


class Searcher(Protocol):
    """The seam for another ranking (embeddings, say: they need model downloads, so BM25 is the default):
    built from an exposure's tools in a worker thread, searched on the loop, closed by its holder."""

    def search(self, query: str, limit: int, visible: Callable[[str], bool] = ...) -> list[str]: ...

    def close(self) -> None: ...


# what builds a Searcher: (tools, public name -> backend)
SearcherFactory = Callable[[Sequence[Tool], dict[str, str]], Searcher]


class ToolIndex:
    """One exposure's tools, searchable. `search` returns tool names, best first, only among those the
    caller may see (`visible`: the same predicate its list was filtered by)."""

    def __init__(self, tools: Sequence[Tool], backends: dict[str, str] | None = None) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, backend, description, params, "
            "tokenize='porter unicode61')"
        )
        self.names: tuple[str, ...] = tuple(str(tool.get("name", "")) for tool in tools)
        self._db.executemany(
            "INSERT INTO tools(rowid, name, backend, description, params) VALUES (?, ?, ?, ?, ?)",
            (_row(i, tool, backends or {}) for i, tool in enumerate(tools)),
        )

    def search(self, query: str, limit: int, visible: Callable[[str], bool] = lambda _: True) -> list[str]:
        match = fts_query(query)
        if not match:
            return []
        found: list[str] = []
        rows = self._db.execute(
            "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, ?, ?, ?, ?) LIMIT ?",
            (match, *_WEIGHTS, max(limit * 4, 50)),
        )
        for (rowid,) in rows:
            name = self.names[rowid]
            if visible(name):
                found.append(name)
                if len(found) >= limit:
                    break
        return found

    def close(self) -> None:
        self._db.close()


def _row(rowid: int, tool: Tool, backends: dict[str, str]) -> tuple[int, str, str, str, str]:
    name = str(tool.get("name", ""))
    description = tool.get("description")
    return (
        rowid,
        " ".join(name_words(name)),
        " ".join(name_words(backends.get(name) or backend_of(name))),
        description if isinstance(description, str) else "",
        " ".join(_param_words(tool)),
    )


def _param_words(tool: Tool) -> Iterable[str]:
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for key in list(properties)[:100]:
            yield from name_words(str(key))
