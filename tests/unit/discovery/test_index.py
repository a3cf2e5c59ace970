"""The discovery index on the 210 real tools of the snapshot (tests/data/discovery/catalogs.json, made by
scripts/snapshot-catalogs): recall of the task queries, result and listing sizes, and hostile queries."""

from __future__ import annotations

from typing import Any

import pytest
from discovery_queries import TASK_QUERIES, snapshot_tools

from actors.discovery.answers import schema_result, search_result, with_schema
from actors.discovery.exposure import listing, summary
from actors.discovery.index import MAX_RESULTS, ToolIndex, clamp_limit, fts_query
from actors.discovery.rows import estimate_tokens
from actors.discovery.settings import DiscoveryMode, DiscoverySettings
from actors.protocol.messages import RpcError

TOOLS = snapshot_tools()
SEARCH = DiscoverySettings(mode=DiscoveryMode.SEARCH)


@pytest.fixture(scope="module")
def index() -> Any:
    built = ToolIndex(TOOLS)
    yield built
    built.close()


def test_the_snapshot_is_the_twelve_servers_210_tools() -> None:
    assert len(TOOLS) == 210
    assert len({tool["name"].partition("__")[0] for tool in TOOLS}) == 12
    assert estimate_tokens(TOOLS) > 60_000  # what direct listing costs: the reason for search mode


def test_recall_at_5_of_the_task_queries_is_at_least_95_percent(index: ToolIndex) -> None:
    assert len(TASK_QUERIES) >= 60
    missed = [
        (query, index.search(query, 5))
        for query, expected in TASK_QUERIES
        if not expected & set(index.search(query, 5))
    ]
    recall = 1 - len(missed) / len(TASK_QUERIES)
    assert recall >= 0.95, missed


def test_every_search_result_is_at_most_1500_tokens(index: ToolIndex) -> None:
    for query, _ in TASK_QUERIES:
        result = search_result(index, TOOLS, {"query": query, "limit": 5})
        assert not result.get("isError")
        assert 1 <= len(result["structuredContent"]["tools"]) <= 5
        assert estimate_tokens(result) <= 1500, query
    widest = search_result(index, TOOLS, {"query": "page file browser issue", "limit": MAX_RESULTS})
    assert len(widest["structuredContent"]["tools"]) == MAX_RESULTS


def test_the_search_mode_listing_is_at_most_500_tokens_and_names_every_backend() -> None:
    listed = listing(TOOLS, SEARCH, lambda: summary(TOOLS, {}))
    assert [tool["name"] for tool in listed] == ["search_tools", "get_tool_schema", "call_tool"]
    assert estimate_tokens(list(listed)) <= 500
    description = listed[0]["description"]
    for backend in ("github", "gitlab", "slack", "notion", "playwright", "kubernetes", "firecrawl", "memory"):
        assert f"{backend} (" in description


def test_auto_searches_past_the_threshold_only() -> None:
    auto = DiscoverySettings(mode=DiscoveryMode.AUTO)  # 8000 tokens by default
    small = TOOLS[:5]
    assert listing(small, auto, lambda: "x") == tuple(small)
    assert [tool["name"] for tool in listing(TOOLS, auto, lambda: "x")][-1] == "call_tool"
    assert listing(TOOLS, DiscoverySettings(), lambda: "x") == tuple(TOOLS)  # direct: as it came


def test_pins_are_listed_before_the_three_tools_and_a_pin_nobody_has_is_not() -> None:
    settings = DiscoverySettings(mode=DiscoveryMode.SEARCH, pin=("slack__slack_post_message", "nobody__x"))
    names = [tool["name"] for tool in listing(TOOLS, settings, lambda: "x")]
    assert names == ["slack__slack_post_message", "search_tools", "get_tool_schema", "call_tool"]


def test_tools_the_caller_may_not_see_are_never_found(index: ToolIndex) -> None:
    seen = [tool for tool in TOOLS if not tool["name"].startswith("github__")]
    for query in ("open a pull request on github", "github", "create issue"):
        rows = search_result(index, seen, {"query": query, "limit": 20})["structuredContent"]["tools"]
        assert rows and all(not row["name"].startswith("github__") for row in rows)
    described = schema_result(seen, {"names": ["github__create_issue", "slack__slack_post_message"]})
    structured = described["structuredContent"]
    assert [tool["name"] for tool in structured["tools"]] == ["slack__slack_post_message"]
    assert structured["unknown"] == ["github__create_issue"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'pull" OR "x',
        "NEAR(pull request, 2)",
        "name:create*",
        "-issue AND ^pull",
        "\x00\x1b[31mpull\r\nrequest\x7f",
        "(((((",
        "pull " * 400,
        "\u202epull request",
    ],
)
def test_fts5_syntax_and_control_characters_in_a_query_are_only_words(index: ToolIndex, query: str) -> None:
    match = fts_query(query)
    assert all(part.startswith('"') and part.endswith('"') for part in match.split(" OR ") if part)
    found = index.search(query, 5)  # never an sqlite3 error
    assert len(found) <= 5


def test_a_query_of_nothing_but_symbols_finds_nothing(index: ToolIndex) -> None:
    assert index.search("!!! ??? ***", 5) == []
    result = search_result(index, TOOLS, {"query": "   "})
    assert result["isError"] is True and "query" in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (3, 3),
        (0, 1),
        (-5, 1),
        (10**100, MAX_RESULTS),
        (1e308, MAX_RESULTS),
        (float("nan"), 5),
        ("7", 5),
        (True, 5),
        (None, 5),
    ],
)
def test_a_limit_of_any_size_or_type_is_clamped(limit: object, expected: int) -> None:
    assert clamp_limit(limit) == expected


def test_bad_arguments_get_a_tool_error_that_says_what_is_wanted(index: ToolIndex) -> None:
    assert search_result(index, TOOLS, {"query": 5})["isError"] is True
    assert search_result(index, TOOLS, {"query": "x" * 501})["isError"] is True
    assert search_result(index, TOOLS, "not an object")["isError"] is True
    assert schema_result(TOOLS, {"names": [f"t{i}" for i in range(6)]})["isError"] is True
    assert schema_result(TOOLS, {"names": [1, 2]})["isError"] is True
    assert schema_result(TOOLS, {})["isError"] is True


def test_an_unknown_name_with_control_characters_is_shown_clean() -> None:
    structured = schema_result(TOOLS, {"names": ["evil\x1b[2J\nname"]})["structuredContent"]
    assert structured == {"tools": [], "unknown": ["evil [2J name"]}


def test_invalid_params_from_upstream_carry_the_tools_definition() -> None:
    tool = TOOLS[0]
    error = with_schema(RpcError(-32602, "Invalid params", {"path": "x"}), tool)
    assert error.data == {"tool": tool, "upstream": {"path": "x"}}
    other = RpcError(-32603, "boom")
    assert with_schema(other, tool) is other
