"""MCP Apps (the `io.modelcontextprotocol/ui` extension, SEP-1865) through the aggregation.

An app is a `ui://` resource a tool points at from its definition: `_meta.ui.resourceUri`, or the older
flat key `_meta["ui/resourceUri"]`. A host reads that URI with resources/read and shows the app; the app's
own tool calls come back to the same server. So a `ui://` URI the gateway must namespace keeps its scheme
(`ui://<backend>/<rest>`, never `backend+ui://...`, which hosts do not recognise as an app), and every place
that names it (the tool's definition in tools/list, a result's `_meta`, resource links and embedded
resources) names it in its public form. A reference to an app the caller may not read is removed: the
host would only fail to load it, and the reference says what exists.

Pure functions: the caller says what a backend's URI is published as (`PublicOf`) and what the caller may
read (`Readable`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

UI_SCHEME: Final = "ui://"
UI_KEY: Final = "ui"  # _meta.ui: the app's settings; its resourceUri names the app
RESOURCE_URI: Final = "resourceUri"
FLAT_KEY: Final = "ui/resourceUri"  # the older spelling, still sent by some servers
PublicOf = Callable[[str], str]  # a backend's own URI -> its public form
Readable = Callable[[str], bool]  # a public URI -> whether the caller may read it


def is_ui(uri: object) -> bool:
    """A `ui://` URI (the scheme compared without case, as URI schemes are)."""
    return type(uri) is str and uri[: len(UI_SCHEME)].lower() == UI_SCHEME


def ui_prefixed(backend: str, uri: str) -> str:
    """`ui://rest` of `backend` as `ui://backend/rest`: namespaced, still an app's URI (the scheme as
    written, so the way back gives the backend its URI exactly)."""
    split = len(UI_SCHEME)
    return f"{uri[:split]}{backend}/{uri[split:]}"


def ui_unprefixed(uri: str) -> tuple[str, str] | None:
    """The backend and its own URI that `ui://backend/rest` names (the backend may not exist), else None."""
    if not is_ui(uri):
        return None
    split = len(UI_SCHEME)
    backend, slash, rest = uri[split:].partition("/")
    return (backend, f"{uri[:split]}{rest}") if slash and backend else None


def with_public_meta(meta: object, public_of: PublicOf, readable: Readable | None) -> object:
    """A `_meta` whose app references are in their public form (or removed when not readable); `meta`
    itself when it has none, or when nothing changes."""
    if type(meta) is not dict:
        return meta
    changed: dict[str, Any] = {}
    removed: list[str] = []
    flat = meta.get(FLAT_KEY)
    if type(flat) is str:
        public = public_of(flat)
        if readable is not None and not readable(public):
            removed.append(FLAT_KEY)
        elif public != flat:
            changed[FLAT_KEY] = public
    ui = meta.get(UI_KEY)
    if type(ui) is dict and type(ui.get(RESOURCE_URI)) is str:
        own = ui[RESOURCE_URI]
        public = public_of(own)
        if readable is not None and not readable(public):
            changed[UI_KEY] = {key: value for key, value in ui.items() if key != RESOURCE_URI}
        elif public != own:
            changed[UI_KEY] = {**ui, RESOURCE_URI: public}
    if not changed and not removed:
        return meta
    return {**{key: value for key, value in meta.items() if key not in removed}, **changed}


def tool_with_public_app(tool: Mapping[str, Any], public_of: PublicOf, readable: Readable | None) -> Any:
    """A tool's definition with its app reference public (`tool` itself when nothing changes)."""
    meta = tool.get("_meta")
    shown = with_public_meta(meta, public_of, readable)
    return tool if shown is meta else {**tool, "_meta": shown}


def result_with_public_uris(
    result: dict[str, Any], public_of: PublicOf, readable: Readable | None
) -> dict[str, Any]:
    """A tool's result with every URI it names public: its `_meta`'s app reference, resource links and
    embedded resources (an app's, a `ui://` one, removed when the caller may not read it). `result` itself
    when nothing changes, so its raw bytes can still be written as they came."""
    shaped = result
    meta = result.get("_meta")
    shown = with_public_meta(meta, public_of, readable)
    if shown is not meta:
        shaped = {**shaped, "_meta": shown}
    content = result.get("content")
    if type(content) is list:
        items = _public_items(content, public_of, readable)
        if items is not content:
            shaped = {**shaped, "content": items}
    return shaped


def _public_items(content: list[Any], public_of: PublicOf, readable: Readable | None) -> list[Any]:
    items: list[Any] = []
    changed = False
    for item in content:
        shown = _public_item(item, public_of, readable)
        changed = changed or shown is not item
        if shown is not None:
            items.append(shown)
    return items if changed else content


def _public_item(item: Any, public_of: PublicOf, readable: Readable | None) -> Any:
    """A content item with its URI public; None when it is an app the caller may not read."""
    if type(item) is not dict:
        return item
    kind = item.get("type")
    if kind == "resource_link" and type(item.get("uri")) is str:
        public = public_of(item["uri"])
        if is_ui(public) and readable is not None and not readable(public):
            return None
        shown = item if public == item["uri"] else {**item, "uri": public}
    elif (
        kind == "resource" and type(item.get("resource")) is dict and type(item["resource"].get("uri")) is str
    ):
        resource = item["resource"]
        public = public_of(resource["uri"])
        if is_ui(public) and readable is not None and not readable(public):
            return None
        shown = item if public == resource["uri"] else {**item, "resource": {**resource, "uri": public}}
    else:
        return item
    meta = shown.get("_meta")
    meta_shown = with_public_meta(meta, public_of, readable)
    return shown if meta_shown is meta else {**shown, "_meta": meta_shown}
