"""`max_output_chars`: how much of a tool's result reaches the client.

The limit in force for a call is the tool's own (`[backends.tools] max_output_chars`), else its route's
(`[[routes]] max_output_chars`, once routes exist), else the gateway's (`[gateway] max_output_chars`), else
none: the most specific setting wins, also when it is larger than a broader one (a tool allowed more than
the gateway's default is how a legitimate large round trip stays possible).

Past the limit:
- text content (`{"type": "text"}` items, and embedded resources' `text`) is cut keeping its head (40 %)
  and tail (60 %) around a notice that states the original size; the cut text is exactly as long as its
  share of the limit, so the result's text is never longer than the limit and cutting a cut result again
  changes nothing; images, audio and blobs pass as they came (cut base64 is broken data);
- `structuredContent` is never cut (cut JSON is broken JSON): the whole result becomes an `isError` result
  naming the size and the limit.
Sizes are characters (Unicode code points), for `structuredContent` those of its compact JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from actors.protocol.codec import clip
from actors.protocol.messages import Tool

MIN_OUTPUT_CHARS: Final = 1000  # room for the notice and some of the text on each side of it
MAX_OUTPUT_CHARS: Final = 1_000_000_000  # past any frame the gateway takes: a bigger number is a typo
HEAD_SHARE: Final = 0.4  # of the kept text: the head; the tail (where errors and totals land) gets the rest
# Claude Code moves a result longer than this many characters to a file, unless the tool's definition
# carries `_meta[SIZE_META_KEY]` (official docs, 2026-10-05): the one client default known here.
CLIENT_DEFAULT_CHARS: Final = 50_000
SIZE_META_KEY: Final = "anthropic/maxResultSizeChars"


def effective_limit(tool: int | None, route: int | None = None, gateway: int | None = None) -> int | None:
    """The limit in force: the tool's, else the route's, else the gateway's (None: no limit)."""
    for limit in (tool, route, gateway):
        if limit is not None:
            return limit
    return None


def notice(original: int, limit: int) -> str:
    """What stands in for the cut middle of a text."""
    return (
        f"\n\n[... cut by the gateway: the text had {original:,} characters, more than the limit of "
        f"{limit:,} ...]\n\n"
    )


def cut_text(text: str, limit: int) -> str:
    """`text` itself when it has at most `limit` characters; else exactly `limit` characters: its head and
    tail around a notice with the original size (only the notice, clipped, when the limit is below it)."""
    if len(text) <= limit:
        return text
    said = notice(len(text), limit)
    kept = limit - len(said)
    if kept <= 0:
        return said[:limit]
    head = int(kept * HEAD_SHARE)
    tail = kept - head
    return text[:head] + said + (text[-tail:] if tail else "")


def structured_size(value: object) -> int:
    """The characters of a value's compact JSON (one transient encoding; a value orjson cannot write
    counts as larger than any limit, so it is refused rather than passed on)."""
    try:
        data = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return MAX_OUTPUT_CHARS + 1
    return len(data) if data.isascii() else len(data.decode())


def oversized_structured(tool: str, size: int, limit: int) -> dict[str, Any]:
    """The isError result that replaces a result whose structuredContent is past the limit."""
    text = (
        f"The result of tool {clip(tool)!r} was withheld by the gateway: its structuredContent has {size:,} "
        f"characters of JSON, more than the limit of {limit:,} (max_output_chars). Ask for less, or ask "
        "the operator to raise this tool's max_output_chars."
    )
    return {"content": [{"type": "text", "text": text}], "isError": True}


def limited_result(result: dict[str, Any], limit: int, tool: str = "") -> dict[str, Any]:
    """The result as it may reach the client under `limit`: `result` itself (the same object, so its raw
    bytes can still be written as they came) when nothing is past the limit."""
    if "structuredContent" in result:
        size = structured_size(result["structuredContent"])
        if size > limit:
            return oversized_structured(tool, size, limit)
    content = result.get("content")
    if type(content) is not list:
        return result
    texts = [text for text in map(_text_of, content) if text is not None]
    total = sum(map(len, texts))
    if total <= limit:
        return result
    share = iter(_shares([len(text) for text in texts], limit))
    cut: list[Any] = []
    for item in content:
        text = _text_of(item)
        cut.append(item if text is None else _with_text(item, cut_text(text, next(share))))
    return {**result, "content": cut}


def _text_of(item: object) -> str | None:
    """The text of a text item, or of an embedded text resource; None for anything else."""
    if type(item) is not dict:
        return None
    if item.get("type") == "text":
        text = item.get("text")
    elif item.get("type") == "resource" and type(item.get("resource")) is dict:
        text = item["resource"].get("text")
    else:
        return None
    return text if type(text) is str else None


def _with_text(item: dict[str, Any], text: str) -> dict[str, Any]:
    if item.get("type") == "text":
        return {**item, "text": text}
    return {**item, "resource": {**item["resource"], "text": text}}


def _shares(sizes: Sequence[int], limit: int) -> list[int]:
    """Each text's share of `limit`: in proportion to its size (summing to at most `limit`)."""
    total = sum(sizes)
    return [min(size, limit * size // total) for size in sizes]


def advertised(tool: Tool, limit: int | None) -> Tool:
    """The tool's definition telling clients with a smaller default (CLIENT_DEFAULT_CHARS) that results up
    to `limit` are meant to be read whole: `_meta[SIZE_META_KEY]`, unless the tool says so itself."""
    if limit is None or limit <= CLIENT_DEFAULT_CHARS:
        return tool
    meta = tool.get("_meta")
    if isinstance(meta, Mapping) and SIZE_META_KEY in meta:
        return tool
    return {**tool, "_meta": {**(meta if isinstance(meta, Mapping) else {}), SIZE_META_KEY: limit}}
