"""Supervision and message plumbing with nothing MCP in it: supervisor, watch, broadcast, channels, log."""
