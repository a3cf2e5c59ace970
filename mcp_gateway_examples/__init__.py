"""The demo MCP servers the default configs run, shipped in the wheel beside the gateway so that an installed
gateway (systemd, Docker, pipx) finds them wherever its config lives:

    python -m mcp_gateway_examples.notes [--db PATH]   notes in SQLite
    python -m mcp_gateway_examples.utility             text and number utilities

`toolserver` is the small stdio server kit both are written with; a starting point for a server of your own.
They import nothing of the gateway (`actors`), only Trio, orjson and the standard library.
"""
