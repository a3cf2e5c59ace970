"""FastMCP's proxy in front of one stdio backend, for scripts/bench's comparison (needs `fastmcp`).

python bench/backends/fastmcp_proxy.py COMMAND [ARGS...]
"""

from __future__ import annotations

import sys

from fastmcp.server import create_proxy  # type: ignore[import-not-found]


def main() -> None:
    command, *args = sys.argv[1:]
    config = {"mcpServers": {"echo": {"command": command, "args": args}}}
    create_proxy(config, name="fastmcp-proxy").run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main()
