"""Middleware: the operator's own code around tool listing and tool calls (see base.py)."""

from actors.middleware.base import CallOutcome, ClientInfo, Middleware, ToolCall

__all__ = ["CallOutcome", "ClientInfo", "Middleware", "ToolCall"]
