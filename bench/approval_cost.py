"""The cost of approval before side effects (#36) on a tools/call that needs none, in-process: what a
routed call pays without [policy] (`approvals.asks` alone) and what `approvals.judge` adds with no approval
settings, with `approve_destructive` (500 tools listed, the called one not destructive), with one approve
rule on the tool's name (kept per caller and tool after its first run), with one on the arguments that the
Python reading answers, and with one only the CEL engine runs; and, for a call that does ask, its digest
(RFC 8785 arguments) and question. Medians of 7 runs of 20,000 calls each.

    .venv/bin/python bench/approval_cost.py
"""

from __future__ import annotations

import statistics
import time
from types import SimpleNamespace
from typing import Any, Final

from actors.policy import STDIO_CALLER, PolicyGate
from actors.policy.approval import DestructiveTools, Need, approval_digest
from actors.policy.context import SAMPLE
from actors.policy.rules import Default, Effect, Policy, compile_rule
from actors.session.approval_asks import question
from actors.session.approvals import asks, judge

CALLS: Final = 20_000
RUNS: Final = 7
TOOLS: Final = tuple(
    {"name": f"tool_{n}", "annotations": {"destructiveHint": n % 10 == 0}} for n in range(1, 501)
)
PARAMS: Final = {"name": "tool_7", "arguments": {"path": "/tmp/notes.txt", "text": "hello", "append": True}}


def dispatcher(policy: Policy | None) -> Any:
    settings = SimpleNamespace(policy=PolicyGate(policy), destructive=DestructiveTools(), tracing=None)
    catalog = SimpleNamespace(value=SimpleNamespace(tools=TOOLS))
    return SimpleNamespace(settings=settings, catalog=catalog, caller=STDIO_CALLER, inflight={})


def per_call_us(d: Any) -> float:
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(CALLS):
            judged = judge(d, 1, PARAMS, "b0", "tool_7", None)
        runs.append((time.perf_counter() - started) / CALLS * 1e6)
        assert judged is None
    return statistics.median(runs)


def rule(when: str) -> Policy:
    return Policy(Default.ALLOW, (compile_rule(Effect.APPROVE, when, "r", SAMPLE),))


def asking_us() -> float:
    need = Need("r", "an approve rule holds")
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(CALLS // 10):
            digest = approval_digest(["https://id.example", "alice"], "b0", "tool_7", PARAMS["arguments"])
            question(need, "b0", "tool_7", PARAMS["arguments"], digest, offers_session=True, modern=True)
        runs.append((time.perf_counter() - started) / (CALLS // 10) * 1e6)
    return statistics.median(runs)


def main() -> None:
    cases = {
        "no approval settings": dispatcher(Policy()),
        "approve_destructive, 500 tools listed": dispatcher(Policy(approve_destructive=True)),
        "1 approve rule on the tool name (kept per caller)": dispatcher(rule('mcp.tool.name == "rm"')),
        "1 approve rule on the arguments (Python)": dispatcher(
            rule('has(mcp.tool.arguments.path) && mcp.tool.arguments.path.startsWith("/etc")')
        ),
        "1 approve rule on the CEL engine": dispatcher(rule("size(mcp.tool.arguments) > 5")),
    }
    plain = dispatcher(None)
    runs = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(CALLS):
            asks(plain)
        runs.append((time.perf_counter() - started) / CALLS * 1e6)
    print(f"{'no [policy]: approvals.asks':50} {statistics.median(runs):7.2f} µs per call")
    for name, d in cases.items():
        print(f"{name:50} {per_call_us(d):7.2f} µs per call that needs no approval")
    print(f"{'a call that asks: digest and question':50} {asking_us():7.2f} µs")


if __name__ == "__main__":
    main()
