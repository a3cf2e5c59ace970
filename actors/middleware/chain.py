"""Running the configured middleware around one session's tool listing and tool calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio
from loguru import logger

from actors.middleware.base import CallOutcome, ClientInfo, Middleware, Tool, ToolCall
from actors.protocol.errors import INTERNAL_ERROR
from actors.protocol.messages import ErrorResponse, Message, RequestId, Response, RpcError

AFTER_CANCEL_S = 1.0  # how long after_call hooks may take for a call the client cancelled


def _name(middleware: Middleware) -> str:
    return type(middleware).__qualname__


def _failed(middleware: Middleware, hook: str) -> RpcError:
    logger.opt(exception=True).error("middleware {}.{} failed", _name(middleware), hook)
    return RpcError(INTERNAL_ERROR, f"Internal error: middleware {_name(middleware)} failed in {hook}")


def _wrong(middleware: Middleware, hook: str, returned: str) -> RpcError:
    """A hook that returned what the gateway cannot use counts as failed (it would break the session)."""
    logger.error("middleware {}.{} returned {}", _name(middleware), hook, returned)
    return RpcError(INTERNAL_ERROR, f"Internal error: middleware {_name(middleware)} failed in {hook}")


@attrs.define
class MiddlewareChain:
    """The middleware of one session, with the tool list it filtered for the catalog version it last saw."""

    middleware: Sequence[Middleware]
    client: ClientInfo
    _filtered: tuple[int, tuple[Tool, ...], frozenset[str]] | None = None

    def tools(self, version: int, tools: tuple[Tool, ...]) -> tuple[Tool, ...] | RpcError:
        """The tools this client may see; computed once per catalog version."""
        if self._filtered is None or self._filtered[0] != version:
            visible: tuple[Tool, ...] = tools
            for middleware in self.middleware:
                try:
                    visible = tuple(middleware.filter_tools(self.client, visible))
                except Exception:
                    return _failed(middleware, "filter_tools")
                if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in visible):
                    return _wrong(middleware, "filter_tools", "tools that are not objects with a name")
            self._filtered = (version, visible, frozenset(t["name"] for t in visible))
        return self._filtered[1]

    def hides(self, version: int, tools: tuple[Tool, ...], name: str) -> bool:
        """True when the filters hide this tool from this client (or fail: then everything is hidden)."""
        if isinstance(self.tools(version, tools), RpcError):
            return True
        assert self._filtered is not None
        return name not in self._filtered[2]

    async def call(
        self,
        request_id: RequestId,
        call: ToolCall,
        forward: Callable[[ToolCall], Awaitable[Message]],
        refused: CallOutcome | None = None,
    ) -> Message:
        """before_call in order, the call (unless refused), then after_call in reverse order. A call the
        gateway itself `refused` (its policy, its limits) skips before_call; every after_call sees it."""
        started = trio.current_time()
        entered: list[Middleware] = [] if refused is None else list(self.middleware)
        outcome = refused  # rejected: an error, or a tool result with isError (over a limit)
        try:
            for middleware in self.middleware if refused is None else ():
                entered.append(middleware)
                try:
                    refusal = await middleware.before_call(call)
                except Exception:
                    refusal = _failed(middleware, "before_call")
                if refusal is not None and not isinstance(refusal, RpcError):
                    refusal = _wrong(
                        middleware, "before_call", f"a {type(refusal).__name__}, not an RpcError"
                    )
                if refusal is not None:
                    outcome = CallOutcome(error=refusal, rejected=True)
                    break
            if outcome is None:
                outcome = _outcome(await forward(call))
        except trio.Cancelled:
            cancelled = CallOutcome(cancelled=True, duration_s=trio.current_time() - started)
            with trio.CancelScope(shield=True), trio.move_on_after(AFTER_CANCEL_S):
                await self._after(entered, call, cancelled)
            raise
        outcome.duration_s = trio.current_time() - started
        outcome = await self._after(entered, call, outcome)
        if outcome.error is not None:
            return ErrorResponse(request_id, outcome.error)
        return Response(request_id, outcome.result)

    async def _after(self, entered: list[Middleware], call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        for middleware in reversed(entered):
            try:
                changed = await middleware.after_call(call, outcome)
            except Exception:
                changed = attrs.evolve(outcome, result=None, error=_failed(middleware, "after_call"))
            if not isinstance(changed, CallOutcome) or not isinstance(changed.error, RpcError | None):
                returned = (
                    f"a {type(changed).__name__}" if not isinstance(changed, CallOutcome) else "an error"
                )
                error = _wrong(middleware, "after_call", f"{returned} the gateway cannot send")
                changed = attrs.evolve(outcome, result=None, error=error)
            outcome = changed
        return outcome


def _outcome(message: Message) -> CallOutcome:
    if isinstance(message, ErrorResponse):
        return CallOutcome(error=message.error)
    assert isinstance(message, Response)
    return CallOutcome(result=message.result)
