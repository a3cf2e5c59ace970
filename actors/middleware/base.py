"""The middleware interface: code of the operator's that sees every session's tool list and every tool call.

Subclass Middleware and override what you need; name the class (or any factory returning one) by dotted path
in the config's [[middleware]] tables. Hooks run in the session's task, in config order for `filter_tools`
and `before_call` and in reverse order for `after_call`, so the first middleware wraps all the others.
A hook that raises is logged with its traceback; the call it was for gets an internal error, and other
sessions and calls go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import trio

from actors.protocol.messages import RpcError, Tool


@attrs.frozen(slots=True)
class ClientInfo:
    """Who is on the other end of a session."""

    session: str  # the gateway's session id ("stdio", or a WebSocket session's id)
    subject: str | None = None  # the bearer token's `sub` when the frontend checks tokens
    name: str | None = None  # clientInfo.name from initialize


@attrs.define(slots=True)
class ToolCall:
    """One round of a tools/call as the gateway routes it. `arguments` may be changed by before_call: every
    round starts from the client's arguments, so a rewrite applies to each."""

    client: ClientInfo
    tool: str  # the public name the client called
    backend: str | None  # the owner; None when no backend has a tool of that name
    backend_tool: str | None  # the owner's own name for it
    arguments: Any
    started_at: float  # wall clock (time.time()) when the gateway received it
    call_id: str = ""  # the same for every round of one call
    round: int = 1  # which round of the call this is: a retry after the backend asked for input is 2, 3...
    decision: str | None = None  # the [policy]'s word on it (allow, deny, approve); None without a [policy]
    rule: str | None = None  # the rule that decided: its name, "rules[N]", "default" or approve_destructive
    # With decision "approve": what became of the user's approval this round (asked, accepted,
    # accepted_for_session, session, declined, cancelled, expired, failed, unasked, unasked_allowed), and the
    # digest it is bound to (principal, route, tool, canonical arguments: actors/policy/approval.py)
    approval: str | None = None
    approval_digest: str | None = None


@attrs.define(slots=True)
class CallOutcome:
    """How a call ended: `result` or `error`, or `cancelled` by the client. after_call may replace either."""

    result: Any = None
    error: RpcError | None = None
    cancelled: bool = False
    rejected: bool = False  # a before_call refused it; it never reached the backend
    duration_s: float = 0.0

    @property
    def status(self) -> str:
        """ok, tool_error (the tool answered with isError), input_required (the backend asks for input
        before the next round), error, rejected or cancelled."""
        if self.cancelled:
            return "cancelled"
        if self.rejected:
            return "rejected"
        if self.error is not None:
            return "error"
        if isinstance(self.result, dict) and self.result.get("isError") is True:
            return "tool_error"
        if isinstance(self.result, dict) and self.result.get("resultType") == "input_required":
            return "input_required"
        return "ok"


class Middleware:
    """Every hook is optional; the defaults change nothing."""

    async def open(self) -> None:
        """What `run` needs, opened before any session (the audit log's file, say): an error here fails the
        gateway's start (raise actors.protocol.errors.GatewayStartError to say why in one line)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background work for the gateway's lifetime (the audit log's writer, say); started after `open`
        and before any session, cancelled at shutdown after every session has ended. It runs under a
        supervisor of its own: an exception it raises is logged and `run` is started again after a backoff,
        while the gateway goes on."""
        task_status.started()

    def filter_tools(self, client: ClientInfo, tools: Sequence[Tool]) -> Sequence[Tool]:
        """The tools this client may see and call (a tool filtered out is refused as unknown)."""
        return tools

    async def before_call(self, call: ToolCall) -> RpcError | None:
        """Return an error to refuse the call; it is then not forwarded."""
        return None

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        """See how a call ended (also refused or cancelled ones) and return the outcome, or a new one."""
        return outcome
