"""Middleware the tests configure by dotted path (tests/ is on sys.path under pytest)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import trio

from actors.middleware import CallOutcome, ClientInfo, Middleware, ToolCall
from actors.protocol.messages import RpcError

REFUSED = -32010


class Policy(Middleware):
    """Hides `hidden`, refuses `refused`, prefixes echo's text with `prefix` on the way in and shouts it on
    the way out."""

    def __init__(self, hidden: Sequence[str] = (), refused: Sequence[str] = (), prefix: str = "") -> None:
        self.hidden, self.refused, self.prefix = set(hidden), set(refused), prefix

    def filter_tools(self, client: ClientInfo, tools: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
        return [tool for tool in tools if tool["name"] not in self.hidden]

    async def before_call(self, call: ToolCall) -> RpcError | None:
        if call.tool in self.refused:
            return RpcError(
                REFUSED, f"{call.tool} is refused by policy for {call.client.subject or 'anyone'}"
            )
        if call.tool == "echo" and isinstance(call.arguments, dict):
            call.arguments = {**call.arguments, "text": self.prefix + str(call.arguments.get("text"))}
        return None

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        if call.tool == "echo" and outcome.result is not None:
            content = [{**item, "text": item["text"].upper()} for item in outcome.result["content"]]
            return attrs.evolve(outcome, result={**outcome.result, "content": content})
        return outcome


class BrokenBeforeCall(Middleware):
    """Raises for tool `add`, as buggy operator code would."""

    async def before_call(self, call: ToolCall) -> RpcError | None:
        if call.tool == "add":
            raise RuntimeError("bug in the operator's middleware")
        return None


class BrokenRun(Middleware):
    """Its background work fails after it started, then runs once restarted: the gateway goes on."""

    def __init__(self) -> None:
        self.runs = 0
        self.restarted = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.runs += 1
        task_status.started()
        if self.runs == 1:
            raise RuntimeError("bug in the operator's background work")
        self.restarted.set()
        await trio.sleep_forever()


def not_a_middleware(**options: Any) -> object:
    return options


def failing_factory() -> Middleware:
    raise ValueError("missing licence key")


class Quota(Middleware):
    """Lets `limit` rounds of `tool` through, gateway-wide, and refuses every one after them."""

    def __init__(self, tool: str, limit: int) -> None:
        self.tool, self.limit, self.used = tool, limit, 0

    async def before_call(self, call: ToolCall) -> RpcError | None:
        if call.tool != self.tool:
            return None
        if self.used >= self.limit:
            return RpcError(REFUSED, f"the quota of {self.limit} calls of {self.tool} is spent")
        self.used += 1
        return None


class PrefixText(Middleware):
    """Rewrites the `text` argument of every tool call: `prefix` before it."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def before_call(self, call: ToolCall) -> RpcError | None:
        if isinstance(call.arguments, dict) and isinstance(call.arguments.get("text"), str):
            call.arguments = {**call.arguments, "text": self.prefix + call.arguments["text"]}
        return None
