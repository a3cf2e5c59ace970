"""Progressive discovery measured on the 210 real tools of twelve npm servers (issue #38): the snapshot in
tests/data/discovery/catalogs.json (scripts/snapshot-catalogs), searched with the task queries of
tests/discovery_queries.py. Reports recall@1/3/5/10, the largest top-5 search result and the search-mode
listing in tokens (compact JSON characters / 4), the direct listing's, and the index's build and query
times (also for the catalog copied ten times: 2,100 tools). Offline, in-process, about a second.

    scripts/bench --scenarios discovery     (or: .venv/bin/python bench/discovery_cost.py; exit 1 on a miss)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path += [str(ROOT), str(ROOT / "tests")]  # after bench/: no test module shadows a bench one

from discovery_queries import TASK_QUERIES, snapshot_tools  # noqa: E402

from actors.discovery.answers import search_result  # noqa: E402
from actors.discovery.exposure import listing, summary  # noqa: E402
from actors.discovery.index import ToolIndex  # noqa: E402
from actors.discovery.rows import estimate_tokens  # noqa: E402
from actors.discovery.settings import DiscoveryMode, DiscoverySettings  # noqa: E402

RECALL_AT_5: Final = 0.95
MAX_RESULT_TOKENS: Final = 1500
MAX_LISTING_TOKENS: Final = 500


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
    }


def discovery_cost() -> dict[str, Any]:
    tools = snapshot_tools()
    started = time.perf_counter()
    index = ToolIndex(tools)
    build_s = time.perf_counter() - started
    ranks: list[int | None] = []
    result_tokens: list[int] = []
    query_s: list[float] = []
    for query, expected in TASK_QUERIES:
        started = time.perf_counter()
        found = index.search(query, 10)
        query_s.append(time.perf_counter() - started)
        ranks.append(next((rank for rank, name in enumerate(found, 1) if name in expected), None))
        result_tokens.append(estimate_tokens(search_result(index, tools, {"query": query, "limit": 5})))
    index.close()
    big = [{**tool, "name": f"{tool['name']}_{copy}"} for copy in range(10) for tool in tools]
    started = time.perf_counter()
    big_index = ToolIndex(big)
    big_build_s = time.perf_counter() - started
    big_query_s = []
    for query, _ in TASK_QUERIES:
        started = time.perf_counter()
        big_index.search(query, 5)
        big_query_s.append(time.perf_counter() - started)
    big_index.close()
    search = listing(tools, DiscoverySettings(mode=DiscoveryMode.SEARCH), lambda: summary(tools, {}))
    total = len(TASK_QUERIES)
    return {
        "tools": len(tools),
        "queries": total,
        "recall": {
            f"at_{k}": round(sum(1 for r in ranks if r is not None and r <= k) / total, 4)
            for k in (1, 3, 5, 10)
        },
        "missed_at_5": [
            query for (query, _), rank in zip(TASK_QUERIES, ranks, strict=True) if not rank or rank > 5
        ],
        "result_tokens_max": max(result_tokens),
        "result_tokens_median": statistics.median(result_tokens),
        "direct_listing_tokens": estimate_tokens(tools),
        "search_listing_tokens": estimate_tokens(list(search)),
        "build_ms": round(build_s * 1000, 2),
        "query": _ms(query_s),
        "tools_2100": {"build_ms": round(big_build_s * 1000, 2), "query": _ms(big_query_s)},
    }


def discovery_misses(result: dict[str, Any]) -> list[str]:
    """The issue's bounds this run missed."""
    misses = []
    if result["recall"]["at_5"] < RECALL_AT_5:
        misses.append(f"recall@5 {result['recall']['at_5']:.1%} < {RECALL_AT_5:.0%}")
    if result["result_tokens_max"] > MAX_RESULT_TOKENS:
        misses.append(f"a search result of {result['result_tokens_max']} tokens > {MAX_RESULT_TOKENS}")
    if result["search_listing_tokens"] > MAX_LISTING_TOKENS:
        misses.append(f"search-mode listing {result['search_listing_tokens']} tokens > {MAX_LISTING_TOKENS}")
    return misses


def print_discovery(result: dict[str, Any]) -> None:
    recall = result["recall"]
    print(
        f"discovery: {result['tools']} tools, {result['queries']} task queries: "
        f"recall @1 {recall['at_1']:.1%}, @3 {recall['at_3']:.1%}, @5 {recall['at_5']:.1%}, "
        f"@10 {recall['at_10']:.1%}"
    )
    print(
        f"discovery: listing {result['direct_listing_tokens']} tokens direct, "
        f"{result['search_listing_tokens']} in search mode; top-5 result median "
        f"{result['result_tokens_median']}, max {result['result_tokens_max']}"
    )
    big = result["tools_2100"]
    print(
        f"discovery: index build {result['build_ms']} ms, query p50 {result['query']['p50_ms']} ms "
        f"(2,100 tools: build {big['build_ms']} ms, query p50 {big['query']['p50_ms']} ms, "
        f"p99 {big['query']['p99_ms']} ms)"
    )
    for miss in discovery_misses(result):
        print(f"discovery: MISSED {miss}")


if __name__ == "__main__":
    figures = discovery_cost()
    print_discovery(figures)
    sys.exit(1 if discovery_misses(figures) else 0)
