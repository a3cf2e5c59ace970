"""The lists a backend offers (tools, prompts, resources, resource templates): which there are, which
notification says each changed, and the reading of one whole list, page by page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from actors.backends.errors import BackendStartError
from actors.backends.input import NAMED_BY, entry_problem
from actors.protocol.codec import shown
from actors.protocol.modern_results import CacheHint, cache_hint_of, merge_cache_hints

if TYPE_CHECKING:
    from actors.backends.connection import BackendLink

MAX_PAGES: Final = 1000  # a server that never stops paginating is broken
MAX_ENTRIES: Final = 50_000  # per list: more tools, prompts or resources than anyone can use is an attack
# The lists the gateway aggregates: kind -> (method, result key, the capability that offers it).
LISTS: Final = {
    "tools": ("tools/list", "tools", "tools"),
    "prompts": ("prompts/list", "prompts", "prompts"),
    "resources": ("resources/list", "resources", "resources"),
    "templates": ("resources/templates/list", "resourceTemplates", "resources"),
}
CHANGES: Final = {  # a list_changed notification -> the kinds to list again
    "notifications/tools/list_changed": ("tools",),
    "notifications/prompts/list_changed": ("prompts",),
    "notifications/resources/list_changed": ("resources", "templates"),
}


async def list_all(link: BackendLink, kind: str) -> tuple[dict[str, Any], ...]:
    """Every page of one list, up to MAX_ENTRIES; unusable entries (backend_input.entry_problem) and
    repeats of a name already listed are dropped."""
    method, key, _ = LISTS[kind]
    items: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    hints: list[CacheHint] = []
    for _ in range(MAX_PAGES):
        page = await link.request(method, {"cursor": cursor} if cursor is not None else None)
        hints.append(cache_hint_of(page))
        link.list_hints[kind] = merge_cache_hints(hints, per_caller_policy=False)  # a legacy page: 0, private
        listed = page.get(key) if isinstance(page, dict) else None
        if not isinstance(listed, list):
            raise BackendStartError(f"{method} answered without a {key} array: {shown(page)}")
        for entry in listed:
            problem = entry_problem(kind, entry)
            if problem is None and entry[NAMED_BY[kind]] in items:
                problem = f"a second entry for {shown(entry[NAMED_BY[kind]])}"
            if problem is not None:
                link.drop(f"{method}: dropped {problem}")
                continue
            items[entry[NAMED_BY[kind]]] = entry
        if len(items) > MAX_ENTRIES:
            logger.warning("{} listed more than {} entries; the rest are left out", method, MAX_ENTRIES)
            return tuple(items.values())[:MAX_ENTRIES]
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            if cursor not in (None, ""):
                link.drop(f"{method}: nextCursor {shown(cursor)} is not a string; the listing ends here")
            return tuple(items.values())
    raise BackendStartError(f"{method} did not end after {MAX_PAGES} pages")


async def first_listings(
    link: BackendLink, capabilities: dict[str, Any]
) -> dict[str, tuple[dict[str, Any], ...]]:
    """Every list the server's capabilities offer, read whole: kind -> entries."""
    kinds = [kind for kind, (_, _, offered_by) in LISTS.items() if offered_by in capabilities]
    return {kind: await list_all(link, kind) for kind in kinds}
