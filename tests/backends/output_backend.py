"""A backend on the official Python SDK (MCPServer over stdio, either era) for output limits and MCP Apps.

`big_text` and `big_structured` make results of the size asked for (the 5 MB fixtures are generated here,
never stored): the text starts with "HEAD" and ends with "TAIL", so a cut that keeps head and tail shows.
`show_app` points at this backend's app, `ui://widget/app.html` (a resource it serves), from its definition
(both `_meta.ui.resourceUri` and the older flat key) and from its result (`_meta`, a resource link, an
embedded resource). Every answer names the backend (`--name`), so a test sees which one a call reached.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, EmbeddedResource, ResourceLink, TextContent, TextResourceContents

NAME: Final = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "output"
APP: Final = "ui://widget/app.html"
APP_MIME: Final = "text/html;profile=mcp-app"
APP_META: Final[dict[str, Any]] = {
    "ui": {"resourceUri": APP, "visibility": ["model", "app"]},
    "ui/resourceUri": APP,
}

server: MCPServer[Any] = MCPServer(name=f"output-{NAME}")


def text_of(chars: int) -> str:
    return "HEAD" + "." * max(chars - 8, 0) + "TAIL" if chars >= 8 else "x" * chars


@server.tool()
def big_text(chars: int, items: int = 1) -> CallToolResult:
    """`items` text items of `chars` characters each."""
    return CallToolResult(content=[TextContent(type="text", text=text_of(chars)) for _ in range(items)])


@server.tool()
def big_structured(chars: int) -> CallToolResult:
    """structuredContent whose compact JSON has `chars` + 11 characters ({"data":"..."}), and a short text."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"{NAME}: structured")],
        structured_content={"data": "s" * chars},
    )


@server.tool(meta=APP_META)
def show_app() -> CallToolResult:
    """Shows this backend's app; the result names it three ways."""
    return CallToolResult(
        content=[
            TextContent(type="text", text=f"{NAME}: app shown"),
            ResourceLink(type="resource_link", uri=APP, name="app", mime_type=APP_MIME),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri=APP, mime_type=APP_MIME, text=f"<p>{NAME}</p>"),
            ),
            ResourceLink(type="resource_link", uri="file:///elsewhere.txt", name="plain"),
        ],
        _meta=APP_META,
    )


@server.resource(APP, name="app", mime_type=APP_MIME)
def app() -> str:
    return f"<html><body>{NAME}'s app</body></html>"


if __name__ == "__main__":
    server.run()
