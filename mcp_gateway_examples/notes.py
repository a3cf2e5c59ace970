"""A demo MCP server: notes kept in SQLite. Needs only Trio, orjson and the standard library.

    python -m mcp_gateway_examples.notes [--db PATH]

The database defaults to $XDG_STATE_HOME/mcp-gateway/notes.sqlite3 ($XDG_STATE_HOME: ~/.local/state), so it
lands somewhere writable whichever folder the server is started in (a config's folder may be read-only).

Tools: add_note, list_notes, get_note, search, delete_note. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

import trio

from mcp_gateway_examples.toolserver import (
    Context,
    JsonObject,
    ToolServer,
    object_schema,
    setup_logging,
    text_result,
    tool_hints,
)

log = logging.getLogger("notes")

VERSION: Final = "1.0.0"
DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 200
SNIPPET: Final = 80
INSTRUCTIONS: Final = (
    "A personal notes store. Use add_note to save, search or list_notes to find (list_notes can filter by "
    "tag), get_note to read one note in full, delete_note to remove one. Notes are identified by integer ids."
)

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS note_tags (
    note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (note_id, tag)
);
CREATE INDEX IF NOT EXISTS note_tags_by_tag ON note_tags(tag);
"""

T = TypeVar("T")


class NoteStore:
    """One SQLite connection, used from worker threads one call at a time (the event loop never blocks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
        self._db.row_factory = sqlite3.Row
        self._db.create_function("casefold", 1, _casefold, deterministic=True)
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.executescript(SCHEMA)
        self._limiter = trio.CapacityLimiter(1)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await trio.to_thread.run_sync(fn, self._db, limiter=self._limiter)

    def close(self) -> None:
        self._db.close()


def _casefold(value: str | None) -> str | None:
    return None if value is None else value.casefold()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clean_tags(tags: list[str]) -> list[str]:
    """Tags are stored trimmed and lowercase, without duplicates, in the order given."""
    return list(dict.fromkeys(tag.strip().lower() for tag in tags if tag.strip()))


# --- queries (run in a worker thread) -----------------------------------------------------------------------


def _tags_of(db: sqlite3.Connection, note_id: int) -> list[str]:
    rows = db.execute("SELECT tag FROM note_tags WHERE note_id = ? ORDER BY tag", (note_id,))
    return [row["tag"] for row in rows]


def _note(db: sqlite3.Connection, row: sqlite3.Row, *, full: bool) -> JsonObject:
    note: JsonObject = {"id": row["id"], "title": row["title"], "tags": _tags_of(db, row["id"])}
    note["created_at"] = row["created_at"]
    if full:
        note["body"] = row["body"]
    else:
        note["snippet"] = _snippet(row["body"])
    return note


def _snippet(body: str) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1] + "…"


def _insert(title: str, body: str, tags: list[str]) -> Callable[[sqlite3.Connection], JsonObject]:
    def run(db: sqlite3.Connection) -> JsonObject:
        with db:
            db.execute("BEGIN IMMEDIATE")
            cursor = db.execute(
                "INSERT INTO notes (title, body, created_at) VALUES (?, ?, ?)", (title, body, _now())
            )
            note_id = cursor.lastrowid
            db.executemany("INSERT INTO note_tags (note_id, tag) VALUES (?, ?)", [(note_id, t) for t in tags])
            row = db.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
            return _note(db, row, full=True)

    return run


def _fetch(note_id: int) -> Callable[[sqlite3.Connection], JsonObject | None]:
    def run(db: sqlite3.Connection) -> JsonObject | None:
        row = db.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
        return None if row is None else _note(db, row, full=True)

    return run


def _list(tag: str | None, limit: int) -> Callable[[sqlite3.Connection], list[JsonObject]]:
    def run(db: sqlite3.Connection) -> list[JsonObject]:
        if tag is None:
            rows = db.execute("SELECT * FROM notes ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        else:
            rows = db.execute(
                "SELECT n.* FROM notes n JOIN note_tags t ON t.note_id = n.id WHERE t.tag = ? "
                "ORDER BY n.id DESC LIMIT ?",
                (tag, limit),
            ).fetchall()
        return [_note(db, row, full=False) for row in rows]

    return run


def _search(query: str) -> Callable[[sqlite3.Connection], list[JsonObject]]:
    def run(db: sqlite3.Connection) -> list[JsonObject]:
        needle = query.casefold()
        rows = db.execute(
            "SELECT * FROM notes WHERE instr(casefold(title), ?) > 0 OR instr(casefold(body), ?) > 0 "
            "ORDER BY id DESC LIMIT ?",
            (needle, needle, MAX_LIMIT),
        ).fetchall()
        return [_note(db, row, full=False) for row in rows]

    return run


def _delete(note_id: int) -> Callable[[sqlite3.Connection], bool]:
    def run(db: sqlite3.Connection) -> bool:
        with db:
            return db.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount > 0

    return run


# --- presentation -------------------------------------------------------------------------------------------


def _note_text(note: JsonObject) -> str:
    tags = ", ".join(note["tags"]) or "(none)"
    return (
        f"Note #{note['id']}: {note['title']}\nTags: {tags}\nCreated: {note['created_at']}\n\n{note['body']}"
    )


def _summary_lines(notes: list[JsonObject], empty: str) -> str:
    if not notes:
        return empty
    lines = []
    for note in notes:
        tags = f" [{', '.join(note['tags'])}]" if note["tags"] else ""
        lines.append(f"#{note['id']} {note['title']}{tags}: {note['snippet']}")
    return "\n".join(lines)


def _missing(note_id: int) -> JsonObject:
    return text_result(
        f"No note with id {note_id}. Use list_notes or search to find note ids.", is_error=True
    )


# --- tools --------------------------------------------------------------------------------------------------


def register(server: ToolServer, store: NoteStore) -> None:
    async def add_note(ctx: Context, arguments: JsonObject) -> JsonObject:
        title, body = arguments["title"].strip(), arguments["body"]
        if not title:
            return text_result("The title must not be blank.", is_error=True)
        note = await store.call(_insert(title, body, _clean_tags(arguments.get("tags", []))))
        return text_result(f"Saved note #{note['id']}: {note['title']}", note)

    async def list_notes(ctx: Context, arguments: JsonObject) -> JsonObject:
        tag = arguments.get("tag")
        tag = tag.strip().lower() if isinstance(tag, str) and tag.strip() else None
        notes = await store.call(_list(tag, int(arguments.get("limit", DEFAULT_LIMIT))))
        empty = f"No notes tagged {tag!r}." if tag else "No notes yet. Add one with add_note."
        return text_result(_summary_lines(notes, empty), {"notes": notes, "count": len(notes)})

    async def get_note(ctx: Context, arguments: JsonObject) -> JsonObject:
        note_id = int(arguments["id"])
        note = await store.call(_fetch(note_id))
        return _missing(note_id) if note is None else text_result(_note_text(note), note)

    async def search(ctx: Context, arguments: JsonObject) -> JsonObject:
        query = arguments["query"]
        notes = await store.call(_search(query))
        empty = f"No notes contain {query!r}."
        return text_result(
            _summary_lines(notes, empty), {"query": query, "notes": notes, "count": len(notes)}
        )

    async def delete_note(ctx: Context, arguments: JsonObject) -> JsonObject:
        note_id = int(arguments["id"])
        if not await store.call(_delete(note_id)):
            return _missing(note_id)
        return text_result(f"Deleted note #{note_id}.", {"deleted": note_id})

    server.add_tool(
        "add_note",
        add_note,
        title="Add a note",
        description="Save a new note with a title, a body and optional tags (stored lowercase). "
        "Returns the saved note with its id.",
        input_schema=object_schema(
            {
                "title": {"type": "string", "minLength": 1, "description": "A short title."},
                "body": {"type": "string", "description": "The note's text."},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional tags."},
            },
            "title",
            "body",
        ),
        output_schema=NOTE_SCHEMA,
        annotations=tool_hints(read_only=False, destructive=False, idempotent=False),
    )
    server.add_tool(
        "list_notes",
        list_notes,
        title="List notes",
        description="List the most recent notes (newest first), optionally only those with a tag. "
        "Each entry has the id, title, tags and a snippet of the body.",
        input_schema=object_schema(
            {
                "tag": {"type": "string", "description": "Only notes with this tag (case-insensitive)."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                    "description": "At most this many notes.",
                },
            }
        ),
        output_schema=LIST_SCHEMA,
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "get_note",
        get_note,
        title="Read a note",
        description="Read one note in full by its id.",
        input_schema=object_schema({"id": {"type": "integer", "description": "The note's id."}}, "id"),
        output_schema=NOTE_SCHEMA,
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "search",
        search,
        title="Search notes",
        description="Find notes whose title or body contains the query (case-insensitive substring match). "
        "Newest first.",
        input_schema=object_schema(
            {"query": {"type": "string", "minLength": 1, "description": "Text to look for."}}, "query"
        ),
        output_schema=object_schema(
            {"query": {"type": "string"}, **LIST_SCHEMA["properties"]}, "query", "notes", "count"
        ),
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "delete_note",
        delete_note,
        title="Delete a note",
        description="Delete one note by its id. This cannot be undone.",
        input_schema=object_schema({"id": {"type": "integer", "description": "The note's id."}}, "id"),
        output_schema=object_schema({"deleted": {"type": "integer"}}, "deleted"),
        annotations=tool_hints(read_only=False, destructive=True, idempotent=True),
    )


_TAGS: Final = {"type": "array", "items": {"type": "string"}}
NOTE_SCHEMA: Final = object_schema(
    {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "body": {"type": "string"},
        "tags": _TAGS,
        "created_at": {"type": "string", "format": "date-time"},
    },
    "id",
    "title",
    "body",
    "tags",
    "created_at",
)
_SUMMARY: Final = object_schema(
    {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "tags": _TAGS,
        "created_at": {"type": "string", "format": "date-time"},
        "snippet": {"type": "string"},
    },
    "id",
    "title",
    "tags",
    "created_at",
    "snippet",
)
LIST_SCHEMA: Final = object_schema(
    {"notes": {"type": "array", "items": _SUMMARY}, "count": {"type": "integer"}}, "notes", "count"
)


# --- entry --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A demo MCP server: notes in SQLite, on stdio.")
    parser.add_argument("--db", default=None, help=f"the SQLite file (default: {default_db()})")
    return parser.parse_args(argv)


def default_db() -> Path:
    """Where the notes live when --db is not given: the user's state folder (XDG), never the current one."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "mcp-gateway" / "notes.sqlite3"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging()
    path = Path(args.db).expanduser() if args.db else default_db()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        store = NoteStore(path)
    except (OSError, sqlite3.Error) as exc:
        log.error("cannot open the notes database %s: %s", path, exc)
        return 1
    server = ToolServer("notes", VERSION, INSTRUCTIONS)
    register(server, store)
    log.info("notes database: %s", path.resolve())
    try:
        return server.run()
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main())
