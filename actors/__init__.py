"""Trio MCP gateway: supervised backend MCP servers behind one endpoint."""

__version__ = "0.1.0"
