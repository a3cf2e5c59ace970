"""max_output_chars as pure functions: exact sizes, the notice, the error's shape, the precedence, and what
a backend's odd values do (nothing: they pass as they came)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.output.limits import (
    CLIENT_DEFAULT_CHARS,
    SIZE_META_KEY,
    advertised,
    cut_text,
    effective_limit,
    limited_result,
    notice,
    structured_size,
)
from actors.output.settings import OutputGate, OutputLimits

MB5 = 5 * 1024 * 1024


def text_result(*texts: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text} for text in texts], **extra}


@pytest.mark.parametrize("limit", [1000, 1001, 20_000, 99_999])
def test_a_cut_text_is_exactly_the_limit_with_head_tail_and_the_original_size(limit: int) -> None:
    text = "H" * (MB5 // 2) + "T" * (MB5 - MB5 // 2)
    cut = cut_text(text, limit)
    said = notice(MB5, limit)
    assert len(cut) == limit
    head, tail = cut.split(said)
    assert set(head) == {"H"} and set(tail) == {"T"}
    assert len(head) == int((limit - len(said)) * 0.4)  # head 40 %, tail the rest
    assert f"{MB5:,} characters, more than the limit of {limit:,}" in said
    assert cut_text(cut, limit) is cut  # a cut result cut again: unchanged


def test_text_within_the_limit_is_the_same_object() -> None:
    text = "x" * 1000
    assert cut_text(text, 1000) is text
    result = text_result(text)
    assert limited_result(result, 1000) is result  # so the backend's raw bytes are still written


def test_a_limit_below_the_notice_keeps_only_the_clipped_notice() -> None:
    assert len(cut_text("x" * 10_000, 50)) == 50


def test_several_texts_share_the_limit_in_proportion() -> None:
    result = limited_result(text_result("a" * 30_000, "b" * 10_000, **{"_meta": {"k": 1}}), 4000)
    first, second = (item["text"] for item in result["content"])
    assert (len(first), len(second)) == (3000, 1000)
    assert result["_meta"] == {"k": 1}  # everything else passes


def test_oversized_structured_content_is_an_error_naming_size_and_limit() -> None:
    result = limited_result(
        {"content": [{"type": "text", "text": "ok"}], "structuredContent": {"data": "é" * MB5}},
        20_000,
        "beta__dump",
    )
    size = MB5 + len('{"data":""}')  # characters, not UTF-8 bytes
    assert result == {
        "content": [
            {
                "type": "text",
                "text": "The result of tool 'beta__dump' was withheld by the gateway: its structuredContent "
                f"has {size:,} characters of JSON, more than the limit of 20,000 (max_output_chars). Ask for "
                "less, or ask the operator to raise this tool's max_output_chars.",
            }
        ],
        "isError": True,
    }


def test_structured_content_within_the_limit_passes_whole() -> None:
    result = {"content": [], "structuredContent": {"rows": list(range(100))}}
    assert limited_result(result, 1000) is result
    assert structured_size(["é"]) == 5


@pytest.mark.parametrize(
    "content",
    [
        None,
        "text",
        {"type": "text"},
        [{"type": "text", "text": 7}, {"type": "image", "data": "x" * 5000}, "loose", None],
    ],
)
def test_odd_content_passes_as_it_came(content: object) -> None:
    result = {"content": content}
    assert limited_result(result, 1000) is result


def test_the_most_specific_limit_wins_even_when_larger() -> None:
    assert effective_limit(None, None, None) is None
    assert effective_limit(None, None, 20_000) == 20_000
    assert effective_limit(None, 30_000, 20_000) == 30_000
    assert effective_limit(90_000, 30_000, 20_000) == 90_000
    assert effective_limit(5_000, 30_000, 20_000) == 5_000
    limits = OutputLimits(20_000, {"beta": {"dump": 90_000}})
    assert limits.limit("beta", "dump") == 90_000
    assert limits.limit("beta", "other", route=30_000) == 30_000
    assert limits.limit("alpha", "dump") == 20_000  # the tool's name is its backend's own


def test_a_limit_above_the_client_default_is_advertised_unless_the_tool_says_its_own() -> None:
    tool = {"name": "dump", "_meta": {"other": 1}}
    assert advertised(tool, 90_000) == {"name": "dump", "_meta": {"other": 1, SIZE_META_KEY: 90_000}}
    assert advertised(tool, CLIENT_DEFAULT_CHARS) is tool
    assert advertised(tool, None) is tool
    own = {"name": "dump", "_meta": {SIZE_META_KEY: 10}}
    assert advertised(own, 90_000) is own
    assert advertised({"name": "x", "_meta": "junk"}, 90_000)["_meta"] == {SIZE_META_KEY: 90_000}
    assert not OutputLimits(20_000).may_advertise() and OutputLimits(20_000).may_advertise(route=60_000)


def test_a_swap_moves_the_generation_only_on_a_change() -> None:
    gate = OutputGate()
    gate.swap(OutputLimits())
    assert gate.generation == 0
    gate.swap(OutputLimits(20_000))
    assert gate.generation == 1 and gate.limits.gateway == 20_000


def test_an_embedded_text_resource_counts_and_is_cut_like_text() -> None:
    embedded = {"type": "resource", "resource": {"uri": "file:///log", "text": "L" * 30_000, "mimeType": "x"}}
    result = limited_result({"content": [{"type": "text", "text": "t" * 10_000}, embedded]}, 4000)
    text, resource = result["content"]
    assert (len(text["text"]), len(resource["resource"]["text"])) == (1000, 3000)
    assert resource["resource"]["uri"] == "file:///log" and resource["resource"]["mimeType"] == "x"
    blob = {"content": [{"type": "resource", "resource": {"uri": "x:", "blob": "A" * 50_000}}]}
    assert limited_result(blob, 1000) is blob
