"""A demo MCP server: small text and number utilities. Needs only Trio, orjson and the standard library.

    python -m mcp_gateway_examples.utility

Tools: search (regex over lines), word_count, uuid, now, hash, calculate. Logs go to stderr.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import math
import operator
import re
import uuid as uuidlib
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import trio

from mcp_gateway_examples.toolserver import (
    Context,
    JsonObject,
    ToolServer,
    object_schema,
    text_result,
    tool_hints,
)

log = logging.getLogger("utility")

VERSION: Final = "1.0.0"
MAX_MATCHES: Final = 1000
MAX_EXPRESSION: Final = 1000  # characters
MAX_INT_BITS: Final = 1024  # beyond this a result is "too large" (and no longer fits a JSON double anyway)
HASHES: Final = ("sha256", "sha1", "md5")

Number = int | float


class CalcError(ValueError):
    """An expression the calculator refuses or cannot evaluate."""


# --- calculate: safe arithmetic over an `ast` tree ----------------------------------------------------------

_BINARY: Final[dict[type[ast.operator], Callable[[Number, Number], Number]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[dict[type[ast.unaryop], Callable[[Number], Number]]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def calculate_expression(expression: str) -> Number:
    """Evaluate numbers, + - * / // % ** and parentheses. Anything else raises CalcError."""
    if len(expression) > MAX_EXPRESSION:
        raise CalcError(f"expression longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalcError(f"not an arithmetic expression ({exc.__class__.__name__})") from None
    try:
        return _evaluate(tree.body)
    except ZeroDivisionError:
        raise CalcError("division by zero") from None
    except (OverflowError, RecursionError, MemoryError):
        raise CalcError("result too large") from None


def _evaluate(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _bounded(_BINARY[type(node.op)](left, right))
    raise CalcError(f"not allowed in an expression: {_describe(node)}")


def _check_power(base: Number, exponent: Number) -> None:
    # Refuse before computing: 9 ** 9 ** 9 would otherwise run for a very long time.
    big_int = isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1
    if big_int and exponent * abs(base).bit_length() > MAX_INT_BITS + 64:
        raise OverflowError
    if isinstance(base, float) and isinstance(exponent, int) and abs(exponent) > 100_000:
        raise OverflowError


def _bounded(value: Number | complex) -> Number:
    if isinstance(value, complex):
        raise CalcError("the result is a complex number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise OverflowError
    if isinstance(value, float) and not math.isfinite(value):
        raise OverflowError
    return value


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"the constant {node.value!r}"
    segment = ast.unparse(node) if isinstance(node, ast.expr) else ""
    kind = node.__class__.__name__
    return f"{kind} {segment!r}" if segment else kind


def _as_json_number(value: Number) -> Number:
    """JSON (and orjson) hold integers up to 64 bits; bigger ones go out as doubles."""
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return float(value)
    return value


# --- the other helpers --------------------------------------------------------------------------------------


def find_lines(pattern: str, text: str, ignore_case: bool) -> list[JsonObject]:
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    matches = []
    for number, line in enumerate(text.splitlines(), start=1):
        if regex.search(line):
            matches.append({"line": number, "text": line})
            if len(matches) >= MAX_MATCHES:
                break
    return matches


def resolve_zone(name: str) -> tzinfo:
    if name.upper() in ("UTC", "Z"):
        return UTC
    return ZoneInfo(name)


# --- tools --------------------------------------------------------------------------------------------------


async def search(ctx: Context, arguments: JsonObject) -> JsonObject:
    pattern, text = arguments["pattern"], arguments["text"]
    try:
        # A worker thread keeps a pathological pattern from stalling the server; cancelling abandons it.
        matches = await trio.to_thread.run_sync(
            find_lines, pattern, text, arguments.get("ignore_case", False), abandon_on_cancel=True
        )
    except re.error as exc:
        return text_result(f"Invalid regular expression {pattern!r}: {exc}", is_error=True)
    lines = "\n".join(f"{m['line']}: {m['text']}" for m in matches) or f"No line matches {pattern!r}."
    return text_result(lines, {"matches": matches, "count": len(matches)})


async def word_count(ctx: Context, arguments: JsonObject) -> JsonObject:
    text = arguments["text"]
    counts = {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}
    return text_result(
        f"{counts['words']} words, {counts['lines']} lines, {counts['characters']} characters", counts
    )


async def new_uuid(ctx: Context, arguments: JsonObject) -> JsonObject:
    value = str(uuidlib.uuid4())
    return text_result(value, {"uuid": value})


async def now(ctx: Context, arguments: JsonObject) -> JsonObject:
    name = arguments.get("timezone") or "UTC"
    try:
        zone = resolve_zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # unknown, malformed, a folder, too long
        return text_result(
            f"Unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'.", is_error=True
        )
    moment = datetime.now(zone)
    iso = moment.isoformat(timespec="seconds")
    structured = {
        "iso": iso,
        "timezone": name,
        "utc_offset": moment.strftime("%z"),
        "unix": int(moment.timestamp()),
    }
    return text_result(f"{iso} ({name})", structured)


async def hash_text(ctx: Context, arguments: JsonObject) -> JsonObject:
    algorithm = arguments.get("algorithm", "sha256")
    digest = hashlib.new(algorithm, arguments["text"].encode("utf-8"), usedforsecurity=False).hexdigest()
    return text_result(digest, {"algorithm": algorithm, "hex": digest})


async def calculate(ctx: Context, arguments: JsonObject) -> JsonObject:
    expression = arguments["expression"]
    try:
        value = calculate_expression(expression)
    except CalcError as exc:
        return text_result(f"Cannot calculate {expression!r}: {exc}.", is_error=True)
    return text_result(str(value), {"expression": expression, "result": _as_json_number(value)})


# --- registration -------------------------------------------------------------------------------------------


TEXT: Final = {"type": "string", "description": "The text to work on."}


def register(server: ToolServer) -> None:
    server.add_tool(
        "search",
        search,
        title="Regex search over lines",
        description="Return the lines of `text` that match the regular expression `pattern` (Python syntax), "
        "with their line numbers.",
        input_schema=object_schema(
            {
                "pattern": {"type": "string", "description": "A regular expression."},
                "text": TEXT,
                "ignore_case": {"type": "boolean", "default": False},
            },
            "pattern",
            "text",
        ),
        output_schema=object_schema(
            {
                "matches": {
                    "type": "array",
                    "items": object_schema({"line": {"type": "integer"}, "text": {"type": "string"}}),
                },
                "count": {"type": "integer"},
            },
            "matches",
            "count",
        ),
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "word_count",
        word_count,
        title="Count words",
        description="Count the words (whitespace-separated), lines and characters of `text`.",
        input_schema=object_schema({"text": TEXT}, "text"),
        output_schema=object_schema(
            {"words": {"type": "integer"}, "lines": {"type": "integer"}, "characters": {"type": "integer"}},
            "words",
            "lines",
            "characters",
        ),
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "uuid",
        new_uuid,
        title="New UUID",
        description="Generate a random (version 4) UUID.",
        input_schema=object_schema({}),
        output_schema=object_schema({"uuid": {"type": "string", "format": "uuid"}}, "uuid"),
        annotations=tool_hints(read_only=True, idempotent=False),
    )
    server.add_tool(
        "now",
        now,
        title="Current time",
        description="The current date and time in an IANA time zone (default UTC), in ISO 8601.",
        input_schema=object_schema(
            {
                "timezone": {
                    "type": "string",
                    "description": "An IANA name such as 'America/New_York'.",
                    "default": "UTC",
                }
            }
        ),
        output_schema=object_schema(
            {
                "iso": {"type": "string", "format": "date-time"},
                "timezone": {"type": "string"},
                "utc_offset": {"type": "string"},
                "unix": {"type": "integer"},
            },
            "iso",
            "timezone",
            "utc_offset",
            "unix",
        ),
        annotations=tool_hints(read_only=True, idempotent=False),
    )
    server.add_tool(
        "hash",
        hash_text,
        title="Hash text",
        description="The hex digest of the UTF-8 bytes of `text` (sha256 by default; sha1 and md5 for legacy "
        "checksums only).",
        input_schema=object_schema(
            {"text": TEXT, "algorithm": {"type": "string", "enum": list(HASHES), "default": "sha256"}}, "text"
        ),
        output_schema=object_schema(
            {"algorithm": {"type": "string"}, "hex": {"type": "string"}}, "algorithm", "hex"
        ),
        annotations=tool_hints(read_only=True),
    )
    server.add_tool(
        "calculate",
        calculate,
        title="Calculator",
        description="Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses. "
        "No names, functions or other syntax.",
        input_schema=object_schema(
            {"expression": {"type": "string", "description": "For example '(2 + 3) * 4 ** 0.5'."}},
            "expression",
        ),
        output_schema=object_schema(
            {"expression": {"type": "string"}, "result": {"type": "number"}}, "expression", "result"
        ),
        annotations=tool_hints(read_only=True),
    )


def main() -> int:
    server = ToolServer(
        "utility",
        VERSION,
        "Text and number helpers: regex search over lines, word counts, UUIDs, the time in any zone, "
        "hashes and a safe calculator.",
    )
    register(server)
    return server.run()


if __name__ == "__main__":
    raise SystemExit(main())
