"""The results of search_tools and get_tool_schema, and the schema an invalid-params error carries: tool
results (text for any client, structuredContent for those that read it), bounded in rows and characters.

Every look-up is among `tools`, the caller's exposure: a tool its list does not show is never found."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from actors.discovery.exposure import MAX_SCHEMAS
from actors.discovery.index import MAX_QUERY_CHARS, Searcher, clamp_limit
from actors.discovery.rows import clean, compact_row
from actors.protocol.errors import INVALID_PARAMS
from actors.protocol.messages import RpcError

MAX_NAME_CHARS: Final = 256

Tool = dict[str, Any]
Result = dict[str, Any]


def error_result(message: str) -> Result:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _result(structured: dict[str, Any]) -> Result:
    text = json.dumps(structured, separators=(",", ":"), ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def search_result(index: Searcher, tools: Sequence[Tool], arguments: object) -> Result:
    """search_tools(query, limit): compact rows of the best matches the caller may see."""
    arguments = arguments if isinstance(arguments, dict) else {}
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return error_result("search_tools needs `query`: a task or keywords as a string")
    if len(query) > MAX_QUERY_CHARS:
        return error_result(f"search_tools: `query` is longer than {MAX_QUERY_CHARS} characters")
    by_name = {str(tool.get("name")): tool for tool in tools}
    found = index.search(query, clamp_limit(arguments.get("limit", 5)), by_name.__contains__)
    return _result({"tools": [compact_row(by_name[name]) for name in found]})


def schema_result(tools: Sequence[Tool], arguments: object) -> Result:
    """get_tool_schema(names): the full definitions of up to MAX_SCHEMAS tools the caller may see."""
    arguments = arguments if isinstance(arguments, dict) else {}
    names = arguments.get("names")
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        return error_result("get_tool_schema needs `names`: a list of tool names from search_tools")
    if len(names) > MAX_SCHEMAS:
        return error_result(f"get_tool_schema: at most {MAX_SCHEMAS} names at a time")
    by_name = {str(tool.get("name")): tool for tool in tools}
    found = [by_name[name] for name in dict.fromkeys(names) if name in by_name]
    unknown = [clean(name, MAX_NAME_CHARS) for name in dict.fromkeys(names) if name not in by_name]
    structured: dict[str, Any] = {"tools": found}
    if unknown:
        structured["unknown"] = unknown
    return _result(structured)


def with_schema(error: RpcError, tool: Tool | None) -> RpcError:
    """An upstream invalid-params error with the tool's definition in its data, so the model can correct
    its arguments (the backend's own data kept under `upstream`); any other error as it came."""
    if error.code != INVALID_PARAMS or tool is None:
        return error
    data: dict[str, Any] = {"tool": tool}
    if error.data is not None:
        data["upstream"] = error.data
    return RpcError(error.code, error.message, data)
