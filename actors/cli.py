"""`mcp-gateway` (and `python -m actors`): serve, check, tools, reload, status, trust, token."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import trio
from loguru import logger

from actors import __version__, cli_token
from actors.admin import status_command, trust_command
from actors.catalog import CatalogView
from actors.cli_reload import reload_command
from actors.config.advice import advice
from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.frontends.listening import ListenError
from actors.gateway import SETTLE_MARGIN_S, Gateway
from actors.protocol.errors import GatewayStartError
from actors.runtime.control import ControlFiles
from actors.runtime.log import LOG_FORMATS, LOG_LEVELS, configure_logging, escape_controls, report
from actors.runtime.supervisor import leaves

DEFAULT_CONFIG: Final = "config/gateway.toml"
CONFIG_VARIABLE: Final = "MCP_GATEWAY_CONFIG"  # the default of --config where it is set (the container image)
EXIT_CONFIG_ERROR: Final = 2
DESCRIPTION_CHARS: Final = 70


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-gateway", description="One MCP endpoint for many supervised MCP servers."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    default_config = os.environ.get(CONFIG_VARIABLE) or DEFAULT_CONFIG
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument(
        "--stdio",
        action="store_true",
        help="serve one MCP client on stdin/stdout (besides [websocket] and [http], if any)",
    )
    check = commands.add_parser("check", help="validate a config file: exit 0, or every problem and exit 2")
    tools = commands.add_parser("tools", help="start the backends, print the aggregated tool catalog, exit")
    reload = commands.add_parser(
        "reload", help="check a config file, then have the gateway serving it load it again (as SIGHUP)"
    )
    reload.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the outcome")
    status_command.add_parser(commands, default_config)
    trust_command.add_parser(commands, default_config)
    cli_token.add_parser(commands, default_config)
    for command in (serve, check, tools, reload):
        command.add_argument(
            "--config",
            default=default_config,
            help=f"TOML config file (default ${CONFIG_VARIABLE}, else {DEFAULT_CONFIG}: {default_config})",
        )
        command.add_argument(
            "--log-level",
            type=str.upper,
            choices=LOG_LEVELS,
            default=os.environ.get("MCP_GATEWAY_LOG_LEVEL", "INFO"),
            help="the least severe level logged (default INFO)",
        )
        command.add_argument("--log-file", default=None, help="also write the log to this file")
        command.add_argument(
            "--log-format",
            choices=LOG_FORMATS,
            default=os.environ.get("MCP_GATEWAY_LOG_FORMAT", "text"),
            help="text (default) or json: one JSON object per line, for log shippers",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "status":  # a client of a running gateway: no logging, no gateway of its own
        return status_command.run(args)
    if args.command == "trust":  # the same, for the review of held definitions
        return trust_command.run(args)
    if args.command == "token":  # reads the listeners' [NAME.auth] only; stdout is the token alone
        return cli_token.run(args)
    _check_log_options(parser, args)
    configure_logging(args.log_level, args.log_file, args.log_format)
    if args.command == "reload":
        return reload_command(args.config, args.timeout)
    try:
        # check: every problem in one pass, with what a start would trip on (commands, listen hosts)
        config = load_config(args.config, check_start=args.command == "check")
        gateway = Gateway(config)  # makes the configured middleware
    except ConfigError as exc:
        for problem in exc.problems:
            report(problem)
        return EXIT_CONFIG_ERROR
    try:
        if args.command == "check":
            for warning in advice(config):
                report(str(warning), "WARNING")
            from actors.sandbox.advice import sandbox_advice  # the probe: only for `check`

            refused = False
            for problem, line in sandbox_advice(config):
                report(line, "ERROR" if problem else "WARNING")
                refused |= problem
            if refused:
                return EXIT_CONFIG_ERROR
            print(f"{config.path}: ok ({_count(len(config.backends), 'backend')})")
            return 0
        if args.command == "tools":
            return _run(_print_tools, gateway)
        if not args.stdio and config.websocket is None and config.http is None:
            reason = "nothing to serve: add a [websocket] or [http] table, or pass --stdio"
            report(f"{config.path}: {reason}")
            return EXIT_CONFIG_ERROR
        if args.stdio and sys.stdin.isatty():
            logger.info("waiting for an MCP client on stdin (one JSON-RPC message per line); Ctrl-C stops")
        return _run(_serve, gateway, args.stdio)
    except KeyboardInterrupt:
        return 130


def _check_log_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse checks `choices` on the command line only: a default from the environment is checked here."""
    for variable, value, allowed in (
        ("MCP_GATEWAY_LOG_LEVEL", args.log_level, LOG_LEVELS),
        ("MCP_GATEWAY_LOG_FORMAT", args.log_format, LOG_FORMATS),
    ):
        if value not in allowed:
            parser.error(f"{variable}={value}: not one of {', '.join(allowed)}")


def _run(main: Callable[..., Awaitable[int]], *args: object) -> int:
    """trio.run, with a gateway that cannot start saying why in one line and exiting 1."""
    code = 1
    try:
        code = trio.run(main, *args)
    except* GatewayStartError as failed:
        errors = leaves(failed)  # `tools` runs the gateway in a nursery of its own: a group within a group
        for error in errors:
            report(f"mcp-gateway: {error}")
        if all(isinstance(error, ListenError) for error in errors):
            code = EXIT_CONFIG_ERROR  # the config names an address this machine cannot give it
    return code


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


async def _serve(gateway: Gateway, stdio: bool) -> int:
    gateway.control = ControlFiles.claim(gateway.config.path)  # None: no folder will do; serve anyway
    try:
        await gateway.run(stdio=stdio)
    finally:
        if gateway.control is not None:
            gateway.control.release()
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
        eras = {name: meter.eras for name, meter in gateway.meters.backends.items() if meter.eras}
        print(format_catalog(view, eras))
        gateway.stop()
    return 0 if all(status.calls is not None for status in view.backends.values()) else 1


def format_catalog(view: CatalogView, eras: dict[str, str] | None = None) -> str:
    """The tool table, then one line per backend (with the eras it is connected in, when known)."""
    rows = [("TOOL", "BACKEND", "BACKEND'S NAME", "DESCRIPTION")]
    for tool in view.tools:
        route = view.routes[tool["name"]]
        description = str(tool.get("description") or "").strip().splitlines()
        first = description[0] if description else ""
        if len(first) > DESCRIPTION_CHARS:
            first = first[: DESCRIPTION_CHARS - 1] + "…"
        own = "" if route.own == tool["name"] else route.own
        name, backend, own, first = (
            escape_controls(cell) for cell in (tool["name"], route.backend, own, first)
        )
        rows.append((name, backend, own, first))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    lines.append("")
    for status in view.backends.values():
        count = sum(1 for route in view.routes.values() if route.backend == status.name)
        era = (eras or {}).get(status.name)
        line = (
            f"backend {status.name}: {status.describe(stderr=True)}"
            + (f", {count} tools" if status.calls else "")
            + (f", eras {era}" if era and status.calls else "")
        )
        lines.append(escape_controls(line))  # a backend's stderr may hold terminal escapes
    return "\n".join(line.rstrip() for line in lines)
