"""Install the twelve npm MCP servers of the discovery measurements (docs/performance.md) and snapshot
their tools/list into tests/data/discovery/catalogs.json, so the discovery tests run offline.

    scripts/snapshot-catalogs [--prefix DIR] [--out FILE]

Each server is started over stdio with placeholder credentials (listing needs none), initialized, and its
tools listed (every page). A server that fails to install or list is reported and left out; the exit code
is 1 if any did."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
OUT: Final = ROOT / "tests" / "data" / "discovery" / "catalogs.json"
TIMEOUT_S: Final = 60.0
# backend name -> (npm package, bin, arguments, environment)
SERVERS: Final[dict[str, tuple[str, str, list[str], dict[str, str]]]] = {
    "everything": ("@modelcontextprotocol/server-everything", "mcp-server-everything", [], {}),
    "filesystem": ("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", ["{tmp}"], {}),
    "memory": ("@modelcontextprotocol/server-memory", "mcp-server-memory", [], {}),
    "github": (
        "@modelcontextprotocol/server-github", "mcp-server-github", [],
        {"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder"},
    ),
    "gitlab": (
        "@modelcontextprotocol/server-gitlab", "mcp-server-gitlab", [],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": "placeholder", "GITLAB_API_URL": "https://gitlab.invalid/api/v4"},
    ),
    "slack": (
        "@modelcontextprotocol/server-slack", "mcp-server-slack", [],
        {"SLACK_BOT_TOKEN": "xoxb-placeholder", "SLACK_TEAM_ID": "T0000"},
    ),
    "thinking": (
        "@modelcontextprotocol/server-sequential-thinking", "mcp-server-sequential-thinking", [], {}
    ),
    "playwright": ("@playwright/mcp", "playwright-mcp", ["--headless"], {}),
    "notion": ("@notionhq/notion-mcp-server", "notion-mcp-server", [], {"NOTION_TOKEN": "placeholder"}),
    "kubernetes": ("mcp-server-kubernetes", "mcp-server-kubernetes", [], {}),
    "devtools": ("chrome-devtools-mcp", "chrome-devtools-mcp", [], {}),
    "firecrawl": ("firecrawl-mcp", "firecrawl-mcp", [], {"FIRECRAWL_API_KEY": "fc-placeholder"}),
}  # fmt: skip


def install(prefix: Path) -> None:
    prefix.mkdir(parents=True, exist_ok=True)
    packages = [package for package, *_ in SERVERS.values()]
    subprocess.run(
        ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *packages],
        check=False, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def list_tools(command: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """initialize, notifications/initialized, tools/list (every page) over the process's stdio."""
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    )
    timer = threading.Timer(TIMEOUT_S, process.kill)
    timer.start()
    assert process.stdin is not None and process.stdout is not None
    try:

        def ask(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            for line in process.stdout:  # type: ignore[union-attr]
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # a server's stray stdout
                if isinstance(message, dict) and message.get("id") == request_id:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message["result"]
            raise RuntimeError(f"the server ended before answering {method}")

        def send(message: dict[str, Any]) -> None:
            process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
            process.stdin.flush()  # type: ignore[union-attr]

        client = {"name": "snapshot-catalogs", "version": "1"}
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for page in range(2, 100):
            result = ask(page, "tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result.get("tools", []))
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise RuntimeError("more than 98 pages of tools")
    finally:
        timer.cancel()
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--prefix", type=Path, help="npm prefix to install into (default: a temporary folder)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-install", action="store_true", help="use what --prefix already holds")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        prefix = options.prefix or Path(scratch) / "npm"
        if not options.no_install:
            install(prefix)
        catalogs: dict[str, list[dict[str, Any]]] = {}
        failed: list[str] = []
        base = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": scratch}
        for name, (package, binary, arguments, env) in SERVERS.items():
            command = [
                str(prefix / "node_modules" / ".bin" / binary),
                *(a.format(tmp=scratch) for a in arguments),
            ]
            try:
                catalogs[name] = list_tools(command, {**base, **env})
            except (OSError, RuntimeError, KeyError) as exc:
                failed.append(name)
                print(f"{name} ({package}): {exc}", file=sys.stderr)
                continue
            print(f"{name}: {len(catalogs[name])} tools")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(catalogs, indent=1, sort_keys=True) + "\n")
    total = sum(len(tools) for tools in catalogs.values())
    print(
        f"{total} tools from {len(catalogs)} servers -> {options.out}"
        + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
