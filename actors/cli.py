"""`mcp-gateway` (and `python -m actors`): serve, check, tools, status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import trio
from loguru import logger

from actors import __version__
from actors.admin import status_command
from actors.catalog import CatalogView
from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.config.resolve import command_problems
from actors.frontends.listening import ListenError
from actors.gateway import SETTLE_MARGIN_S, Gateway
from actors.protocol.errors import GatewayStartError
from actors.runtime.log import configure_logging

DEFAULT_CONFIG: Final = "config/gateway.toml"
EXIT_CONFIG_ERROR: Final = 2
DESCRIPTION_CHARS: Final = 70


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-gateway", description="One MCP endpoint for many supervised MCP servers."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument(
        "--stdio",
        action="store_true",
        help="serve one MCP client on stdin/stdout (besides [websocket] and [http], if any)",
    )
    check = commands.add_parser("check", help="validate a config file: exit 0, or every problem and exit 2")
    tools = commands.add_parser("tools", help="start the backends, print the aggregated tool catalog, exit")
    status_command.add_parser(commands, DEFAULT_CONFIG)
    for command in (serve, check, tools):
        command.add_argument(
            "--config", default=DEFAULT_CONFIG, help=f"TOML config file (default {DEFAULT_CONFIG})"
        )
        command.add_argument("--log-level", default=os.environ.get("MCP_GATEWAY_LOG_LEVEL", "INFO"))
        command.add_argument("--log-file", default=None, help="also write the log to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "status":  # a client of a running gateway: no logging, no gateway of its own
        return status_command.run(args)
    configure_logging(args.log_level, args.log_file)
    try:
        config = load_config(args.config)
        gateway = Gateway(config)  # makes the configured middleware
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        if args.command == "check":
            missing = command_problems(config)
            for problem in missing:
                print(problem, file=sys.stderr)
            if missing:
                return EXIT_CONFIG_ERROR
            print(f"{config.path}: ok ({_count(len(config.backends), 'backend')})")
            return 0
        if args.command == "tools":
            return _run(_print_tools, gateway)
        if not args.stdio and config.websocket is None and config.http is None:
            reason = "nothing to serve: add a [websocket] or [http] table, or pass --stdio"
            print(f"{config.path}: {reason}", file=sys.stderr)
            return EXIT_CONFIG_ERROR
        if args.stdio and sys.stdin.isatty():
            logger.info("waiting for an MCP client on stdin (one JSON-RPC message per line); Ctrl-C stops")
        return _run(_serve, gateway, args.stdio)
    except KeyboardInterrupt:
        return 130


def _run(main: Callable[..., Awaitable[int]], *args: object) -> int:
    """trio.run, with a gateway that cannot start saying why in one line and exiting 1."""
    code = 1
    try:
        code = trio.run(main, *args)
    except* GatewayStartError as failed:
        for error in failed.exceptions:
            print(f"mcp-gateway: {error}", file=sys.stderr)
        if all(isinstance(error, ListenError) for error in failed.exceptions):
            code = EXIT_CONFIG_ERROR  # the config names an address this machine cannot give it
    return code


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


async def _serve(gateway: Gateway, stdio: bool) -> int:
    await gateway.run(stdio=stdio)
    return gateway.exit_code


async def _print_tools(gateway: Gateway) -> int:
    config = gateway.config
    async with trio.open_nursery() as nursery:
        watch = await nursery.start(lambda task_status: gateway.run(websocket=False, task_status=task_status))
        longest = max(config.startup_timeout_s(b) for b in config.backends) + SETTLE_MARGIN_S
        with trio.move_on_after(longest):
            version, view = watch.version, watch.value
            while not view.settled:
                version, view = await watch.wait_newer(version)
        view = watch.value
        print(format_catalog(view))
        gateway.stop()
    return 0 if all(status.calls is not None for status in view.backends.values()) else 1


def format_catalog(view: CatalogView) -> str:
    rows = [("TOOL", "BACKEND", "BACKEND'S NAME", "DESCRIPTION")]
    for tool in view.tools:
        route = view.routes[tool["name"]]
        description = str(tool.get("description") or "").strip().splitlines()
        first = description[0] if description else ""
        if len(first) > DESCRIPTION_CHARS:
            first = first[: DESCRIPTION_CHARS - 1] + "…"
        rows.append((tool["name"], route.backend, "" if route.own == tool["name"] else route.own, first))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    lines.append("")
    for status in view.backends.values():
        count = sum(1 for route in view.routes.values() if route.backend == status.name)
        lines.append(
            f"backend {status.name}: {status.describe(stderr=True)}"
            + (f", {count} tools" if status.calls else "")
        )
    return "\n".join(line.rstrip() for line in lines)
