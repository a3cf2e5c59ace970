"""The checks a modern POST passes on the HTTP front, alone: the base64 sentinel, the Mcp-Param-* headers a
tool declares and their comparison with the arguments, and the order of the ladder's checks."""

from __future__ import annotations

import base64
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.http.ladder import is_modern_post, refusal
from actors.frontends.http.param_headers import ParamHeader, declared_headers, header_value, param_mismatch
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from actors.protocol.messages import Batch, Message, Notification, Request, Response

MODERN: Final = "2026-07-28"
ENVELOPE: Final = {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: {}}


def sentinel(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


@pytest.mark.parametrize(
    ("raw", "meant"),
    [
        ("  eu\t", "eu"),  # spaces and tabs around a value are not part of it
        ("=?base64?SGVsbG8=?=", "Hello"),
        (" =?base64?SGVsbG8=?= ", "Hello"),
        ("=?base64??=", ""),
        ("=?base64?SGVsbG8", "=?base64?SGVsbG8"),  # no suffix: a literal
        ("SGVsbG8=?=", "SGVsbG8=?="),  # no prefix: a literal
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # the prefix is lower-case, exactly
        ("=?base64?=", "=?base64?="),  # prefix and suffix overlap: too short to be one
        ("=?base64?SGVsbG8?=", None),  # not padded
        ("=?base64?SGVs!!!bG8=?=", None),  # not the alphabet
        ("=?base64?SGVsbG9=?=", None),  # stray bits in the last character: not canonical
        ("=?base64?/w==?=", None),  # not UTF-8
        ("=?base64?SGVs bG8=?=", None),
    ],
)
def test_header_values_are_trimmed_and_sentinels_decoded_strictly(raw: str, meant: str | None) -> None:
    assert header_value(raw) == meant


@given(st.text())
def test_every_text_survives_the_sentinel(text: str) -> None:
    assert header_value(sentinel(text)) == text


SCHEMA: Final = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "place": {"type": "object", "properties": {"city": {"type": "string", "x-mcp-header": "City"}}},
        "ratio": {"type": "number", "x-mcp-header": "Ratio"},  # numbers may not be mirrored
        "spaced": {"type": "string", "x-mcp-header": "Not A Token"},
        "again": {"type": "string", "x-mcp-header": "REGION"},  # the name is taken (ignoring case)
    },
    "allOf": [{"properties": {"hidden": {"type": "string", "x-mcp-header": "Hidden"}}}],  # not by properties
}


def test_declarations_count_only_where_the_era_allows_them() -> None:
    assert declared_headers(SCHEMA) == (
        ParamHeader("Mcp-Param-Region", ("region",), "string"),
        ParamHeader("Mcp-Param-Count", ("count",), "integer"),
        ParamHeader("Mcp-Param-Dry", ("dry",), "boolean"),
        ParamHeader("Mcp-Param-City", ("place", "city"), "string"),
    )
    assert declared_headers(None) == declared_headers({"properties": []}) == ()


ARGUMENTS: Final = {"region": "eu", "count": 42, "dry": True, "place": {"city": "Zürich"}}
AGREEING: Final = {
    "mcp-param-region": "eu",
    "mcp-param-count": "42",
    "mcp-param-dry": "true",
    "mcp-param-city": sentinel("Zürich"),
    "mcp-param-unknown": "ignored",
}


@pytest.mark.parametrize(
    ("changes", "arguments", "header"),
    [
        ({}, ARGUMENTS, None),
        ({"mcp-param-count": "42.0"}, ARGUMENTS, None),  # an integer compares as a number
        ({"mcp-param-count": "0042"}, ARGUMENTS, None),
        ({"mcp-param-count": "42.5"}, ARGUMENTS, "Mcp-Param-Count"),
        ({"mcp-param-count": "4.2e1"}, ARGUMENTS, "Mcp-Param-Count"),  # no exponents
        ({"mcp-param-dry": "True"}, ARGUMENTS, "Mcp-Param-Dry"),
        ({"mcp-param-region": None}, ARGUMENTS, "Mcp-Param-Region"),  # absent with a value in the body
        ({"mcp-param-city": "=?base64?WnVyaWNo?="}, ARGUMENTS, "Mcp-Param-City"),  # decoded, then different
        ({"mcp-param-city": "=?base64?WnVyaWNo?=="}, ARGUMENTS, "Mcp-Param-City"),  # malformed
        ({}, {**ARGUMENTS, "region": None}, "Mcp-Param-Region"),  # present with null in the body
        ({"mcp-param-region": None}, {**ARGUMENTS, "region": None}, None),  # null: no header
        ({}, {**ARGUMENTS, "place": "Zürich"}, "Mcp-Param-City"),  # nothing at the path
    ],
)
def test_declared_headers_must_say_what_the_arguments_say(
    changes: dict[str, str | None], arguments: dict[str, Any], header: str | None
) -> None:
    headers = {name: value for name, value in {**AGREEING, **changes}.items() if value is not None}
    error = param_mismatch(headers, declared_headers(SCHEMA), arguments)
    assert (error.data["header"] if error is not None else None) == header
    assert error is None or error.code == -32020


def modern(method: str, **params: Any) -> Request:
    return Request(1, method, {**params, "_meta": ENVELOPE})


def headers_for(method: str, **extra: str) -> dict[str, str]:
    return {"mcp-protocol-version": MODERN, "mcp-method": method, **extra}


@pytest.mark.parametrize(
    ("headers", "message", "modern_post"),
    [
        ({}, modern("tools/list"), True),
        ({"mcp-protocol-version": " 2026-07-28 "}, Request(1, "tools/list"), True),
        ({"mcp-protocol-version": "2025-11-25"}, Request(1, "tools/list"), False),
        ({}, Batch((Request(1, "tools/list"), Notification("x", {"_meta": ENVELOPE}))), True),
        ({}, Batch((Request(1, "tools/list"),)), False),
        ({}, Response(1, {}), False),
    ],
)
def test_which_posts_are_modern(headers: dict[str, str], message: Message, modern_post: bool) -> None:
    assert is_modern_post(headers, message) is modern_post


@pytest.mark.parametrize(
    ("headers", "request_", "code"),
    [
        (headers_for("tools/call", **{"mcp-name": "\t echo "}), modern("tools/call", name="echo"), None),
        (headers_for(" tools/list\t"), modern("tools/list"), None),
        (headers_for("tools/call"), modern("tools/call", name=7), None),  # no string to mirror: in band
        (
            headers_for("resources/read", **{"mcp-name": "test://a"}),
            modern("resources/read", uri="test://a"),
            None,
        ),
        (
            headers_for("resources/read", **{"mcp-name": "test://b"}),
            modern("resources/read", uri="test://a"),
            -32020,
        ),
        ({"mcp-method": "tools/list"}, modern("tools/list"), -32020),  # a claim, and no version header
        (headers_for("tools/list"), Request(1, "tools/list", {"_meta": {PROTOCOL_VERSION_KEY: 7}}), -32020),
        (
            {"mcp-method": "tools/list"},
            Request(1, "tools/list", {"_meta": {PROTOCOL_VERSION_KEY: 7}}),
            -32602,
        ),
        (
            {},
            Request(1, "tools/list", {"_meta": {PROTOCOL_VERSION_KEY: "x" * 65}}),
            -32602,
        ),  # too long to echo
        ({"mcp-protocol-version": "2099-01-01"}, Request(1, "tools/list"), -32602),  # no envelope
    ],
)
def test_the_ladder_reads_headers_as_the_era_says(
    headers: dict[str, str], request_: Request, code: int | None
) -> None:
    refused = refusal(headers, request_)
    assert (refused.error.code if refused is not None else None) == code
