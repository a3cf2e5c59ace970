"""`mcp-gateway status [--config F | --url U]`: the tree of a running gateway, read from its admin listener.

Exit 0 with the tree; 1 with one line when no gateway answers there (not running, unreachable, refused
the token, not an admin listener); 2 when the config cannot say where the admin listener is. With
--config, the other gateways serving the same file (found by their control files, runtime/control_peers.py;
only one can hold the admin port) are listed under the tree by pid. Everything the gateway sent is printed
with its control characters escaped, as the log does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.runtime.control_peers import find_peers
from actors.runtime.log import escape_controls

if TYPE_CHECKING:
    import httpx2

TOKEN_VARIABLE: Final = "MCP_GATEWAY_ADMIN_TOKEN"  # the token for --url (with --config: [admin] token_env)
TIMEOUT_S: Final = 5.0
EXIT_UNREACHABLE: Final = 1
EXIT_CONFIG_ERROR: Final = 2
CONNECT_HOSTS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # a wildcard: this machine


class StatusError(Exception):
    """Why the status could not be had, in one line; `code` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_UNREACHABLE) -> None:
        super().__init__(message)
        self.code = code


def add_parser(commands: Any, default_config: str) -> None:
    status = commands.add_parser(
        "status", help="print the tree of a running gateway (via its [admin] listener)"
    )
    where = status.add_mutually_exclusive_group()
    where.add_argument(
        "--config", help=f"the gateway's config file: its [admin] table (default {default_config})"
    )
    where.add_argument(
        "--url", help=f"the admin listener's URL, e.g. http://127.0.0.1:8767 (token: ${TOKEN_VARIABLE})"
    )
    status.set_defaults(default_config=default_config)


def run(args: argparse.Namespace) -> int:
    try:
        url, token = _where(args)
        tree = fetch_status(url, token)
    except StatusError as exc:
        print(escape_controls(f"mcp-gateway status: {exc}"), file=sys.stderr)
        if not args.url and exc.code == EXIT_CONFIG_ERROR and Path(config_of(args)).exists():
            others = other_gateways(config_of(args), None)
            if others:
                print(f"gateways serving {Path(config_of(args)).resolve()}: pid {others}", file=sys.stderr)
        return exc.code
    print(format_tree(tree))
    if not args.url:
        others = other_gateways(config_of(args), tree["gateway"].get("pid"))
        if others:
            print(
                f"also serving {Path(config_of(args)).resolve()} (without the admin listener): pid {others}"
            )
    return 0


def config_of(args: argparse.Namespace) -> str:
    return str(args.config or args.default_config)


def missing_config(config_path: str, command: str) -> str | None:
    """When the file is not there: which file was looked for (absolute), and what to do."""
    if Path(config_path).exists():
        return None
    return (
        f"mcp-gateway {command}: no config file at {Path(config_path).absolute()} (looked for {config_path} "
        f"from {Path.cwd()}); pass --config with the file the gateway serves"
    )


def other_gateways(config_path: str, shown: object) -> str:
    """The pids of the gateways serving the config (their control files say so, and each passes the
    checks) other than `shown`, the one whose tree was printed: "12, 34", or ""."""
    return ", ".join(
        str(peer.pid) for peer in find_peers(config_path) if peer.problem is None and peer.pid != shown
    )


def _where(args: argparse.Namespace) -> tuple[str, str | None]:
    return admin_address(args, "status")


def admin_address(args: argparse.Namespace, command: str) -> tuple[str, str | None]:
    """The admin listener's URL and token, from --url (and $MCP_GATEWAY_ADMIN_TOKEN) or the config's
    [admin] table; StatusError when the config cannot say."""
    if args.url:
        return args.url.rstrip("/"), os.environ.get(TOKEN_VARIABLE, "").strip() or None
    path = config_of(args)
    missing = missing_config(path, command)
    if missing is not None:
        raise StatusError(missing.removeprefix(f"mcp-gateway {command}: "), EXIT_CONFIG_ERROR)
    try:
        config = load_config(path)
    except ConfigError as exc:
        raise StatusError("; ".join(str(problem) for problem in exc.problems), EXIT_CONFIG_ERROR) from None
    admin = config.admin
    if admin is None:
        raise StatusError(
            f"{path}: no [admin] table, so the gateway has no admin listener", EXIT_CONFIG_ERROR
        )
    if admin.port == 0:
        reason = "[admin] port is 0 (any free port): pass --url with the port the gateway logged"
        raise StatusError(f"{path}: {reason}", EXIT_CONFIG_ERROR)
    host = CONNECT_HOSTS.get(admin.host, admin.host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{admin.port}", admin.token


def fetch_status(url: str, token: str | None) -> dict[str, Any]:
    """GET {url}/status, or StatusError saying in one line why not."""
    import httpx2  # only for the command that asks (start-up of `serve` is without it)

    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx2.get(f"{url}/status", headers=headers, timeout=TIMEOUT_S)
    except httpx2.ConnectError:
        raise StatusError(f"no gateway is running at {url} (connection refused or unreachable)") from None
    except httpx2.TimeoutException:
        raise StatusError(f"the gateway at {url} did not answer within {TIMEOUT_S}s") from None
    except httpx2.HTTPError as exc:
        raise StatusError(f"cannot reach {url}: {exc}") from None
    if response.status_code == 401:
        hint = f"set {TOKEN_VARIABLE}" if token is None else "the token was refused"
        raise StatusError(f"the admin listener at {url} needs its bearer token ({hint})")
    if response.status_code != 200:
        raise StatusError(f"{url}/status answered HTTP {response.status_code}: {_error_of(response)}")
    try:
        tree = response.json()
    except ValueError:
        raise StatusError(f"{url}/status did not answer JSON: is it a gateway's admin listener?") from None
    if not isinstance(tree, dict) or not {"gateway", "frontends", "backends"} <= tree.keys():
        raise StatusError(f"{url}/status is not a gateway's status: is it a gateway's admin listener?")
    return tree


def _error_of(response: httpx2.Response) -> str:
    try:
        return str(response.json().get("error", ""))[:200]
    except (ValueError, AttributeError):
        return response.text[:200]


def format_tree(tree: dict[str, Any]) -> str:
    gateway = tree["gateway"]
    ready = "ready" if gateway.get("ready") else "starting" if not gateway.get("settled") else "NOT READY"
    lines = [
        f"gateway {gateway['name']} {gateway['version']}: {ready}, pid {gateway['pid']}, "
        f"up {duration(gateway['uptime_s'])} ({gateway['config']})"
    ]
    frontends = [_frontend(frontend) for frontend in tree["frontends"]]
    backends = [_backend(backend) for backend in tree["backends"]]
    lines += _branch("frontends", frontends or [["(none)"]], last=False)
    lines += _branch("backends", backends or [["(none)"]], last=True)
    return "\n".join(escape_controls(line) for line in lines)


def _branch(title: str, children: list[list[str]], *, last: bool) -> list[str]:
    """A subtree: `title`, then each child (its first line, then its detail lines) drawn below it."""
    lines = [("└── " if last else "├── ") + title]
    indent = "    " if last else "│   "
    for index, child in enumerate(children):
        final = index == len(children) - 1
        lines.append(indent + ("└── " if final else "├── ") + child[0])
        lines += [indent + ("    " if final else "│   ") + detail for detail in child[1:]]
    return lines


def _frontend(frontend: dict[str, Any]) -> list[str]:
    where = f" {frontend['url']}" if frontend.get("url") else ""
    count = frontend["session_count"]
    head = f"{frontend['name']}{where}: {count} session{'' if count == 1 else 's'}"
    sessions = frontend.get("sessions") or []
    more = count - len(sessions)
    return [head] + ([", ".join(sessions) + (f" and {more} more" if more > 0 else "")] if sessions else [])


def _backend(backend: dict[str, Any]) -> list[str]:
    facts = [backend["state"] + (f" ({backend['reason']})" if backend.get("reason") else "")]
    if backend.get("pid") is not None:
        facts.append(f"pid {backend['pid']}")
    if backend.get("uptime_s") is not None:
        facts.append(f"up {duration(backend['uptime_s'])}")
    restarts = backend["restarts"]
    facts.append(f"{restarts} restart{'' if restarts == 1 else 's'}")
    facts.append(f"{backend['tools']} tools")
    if backend.get("inflight"):
        facts.append(f"{backend['inflight']} in flight")
    if backend.get("listening"):
        facts.append("listening")
    if backend.get("eras"):
        facts.append(f"eras {backend['eras']}")
    head = f"{backend['name']}{' (required)' if backend.get('required') else ''}: {', '.join(facts)}"
    error = backend.get("last_error")
    return [head] + _sandbox(backend.get("sandbox")) + ([f"last error: {error['reason']}"] if error else [])


def _sandbox(sandbox: dict[str, Any] | None) -> list[str]:
    """sandbox require: bwrap,landlock,rlimits,uid; missing tasks"""
    if not sandbox or "engines" not in sandbox:
        return [f"sandbox {sandbox['mode']}"] if sandbox else []
    missing = sandbox.get("missing") or []
    line = f"sandbox {sandbox['mode']}: {','.join(sandbox['engines'])}"
    return [line + (f"; missing {','.join(missing)}" if missing else "; every rule enforced")]


def duration(seconds: float) -> str:
    """3725.2 -> '1h 2m'; 42.0 -> '42s'."""
    whole = int(seconds)
    days, hours, minutes, secs = whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n] or ["0s"]
    return " ".join(shown[:2])
