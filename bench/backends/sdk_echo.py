"""A backend written with the official MCP Python SDK (what users run): one tool, echo. For scripts/bench."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-echo", version="1.0.0")


@server.tool()
def echo(text: str) -> str:
    """Return `text` unchanged."""
    return text


if __name__ == "__main__":
    server.run()
