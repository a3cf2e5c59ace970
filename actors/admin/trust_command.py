"""`mcp-gateway trust [--config F | --url U] list | diff NAME | approve NAME | reject NAME`: the operator's
review of held definitions, through the running gateway's admin listener and its token (trust_routes.py).

NAME is BACKEND/NAME: the backend's config name and the definition's own name as that backend lists it (a
resource template's: its uriTemplate), as `list` shows it; `--kind` says which when one name is held as
two kinds. `approve` and `reject` take `--digest` (at least 8 hex digits, as `list` and `diff` show them):
the decision then applies only if the held form is still the one reviewed. `--by` names who decides in the
trust log (default: USER@HOST). Exit 0 on success; 1 with one line when the gateway cannot be reached or
refuses (not found, changed since, no token); 2 when the config cannot say where the admin listener is.
What the gateway sent is printed with its control characters escaped.
"""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, Final

from actors.admin.status_command import (
    TIMEOUT_S,
    TOKEN_VARIABLE,
    StatusError,
    admin_address,
    duration,
)
from actors.runtime.log import escape_controls
from actors.trust.definitions import KINDS

if TYPE_CHECKING:
    pass

EXIT_REFUSED: Final = 1
DIGEST_SHOWN: Final = 12


def add_parser(commands: Any, default_config: str) -> None:
    trust = commands.add_parser(
        "trust", help="review definitions held by [trust]: list, diff, approve, reject (via [admin])"
    )
    where = trust.add_mutually_exclusive_group()
    where.add_argument(
        "--config", help=f"the gateway's config file: its [admin] table (default {default_config})"
    )
    where.add_argument(
        "--url", help=f"the admin listener's URL, e.g. http://127.0.0.1:8767 (token: ${TOKEN_VARIABLE})"
    )
    trust.set_defaults(default_config=default_config)
    actions = trust.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every held definition, and each backend's trust")
    for action, text in (
        ("diff", "what changed in a held definition, and what the scan found"),
        ("approve", "make a held definition the approved one: clients see it again"),
        ("reject", "keep a held definition hidden, marked rejected"),
    ):
        parser = actions.add_parser(action, help=text)
        parser.add_argument("name", help="BACKEND/NAME, as `trust list` shows it")
        parser.add_argument(
            "--kind", choices=KINDS, help="tool, prompt or template, when NAME is held as two"
        )
        parser.add_argument("--digest", help="the held digest reviewed (at least 8 hex digits)")
        if action != "diff":
            parser.add_argument(
                "--by", default=None, help="who decides, for the trust log (default USER@HOST)"
            )


def run(args: argparse.Namespace) -> int:
    try:
        url, token = admin_address(args, "trust")
        if args.action == "list":
            print(format_list(_call("GET", f"{url}/trust", token)))
        elif args.action == "diff":
            query = {"name": args.name, **({"kind": args.kind} if args.kind else {})}
            query |= {"digest": args.digest} if args.digest else {}
            print(format_diff(_call("GET", f"{url}/trust/diff", token, params=query)))
        else:
            body = {"name": args.name, "by": args.by or _who()}
            body |= {key: value for key in ("kind", "digest") if (value := getattr(args, key))}
            answer = _call("POST", f"{url}/trust/{args.action}", token, json=body)
            word = "approved" if args.action == "approve" else "rejected"
            key = answer[word]
            print(
                escape_controls(
                    f"{word} {key['kind']} {key['id']} (digest {answer['digest'][:DIGEST_SHOWN]})"
                )
            )
    except StatusError as exc:
        print(escape_controls(f"mcp-gateway trust: {exc}"), file=sys.stderr)
        return exc.code
    return 0


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _call(method: str, url: str, token: str | None, **options: Any) -> dict[str, Any]:
    """One request to the admin listener: its JSON answer, or StatusError saying in one line why not."""
    import httpx2  # only for the command that asks (start-up of `serve` is without it)

    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx2.request(method, url, headers=headers, timeout=TIMEOUT_S, **options)
    except httpx2.ConnectError:
        raise StatusError(f"no gateway is running at {url} (connection refused or unreachable)") from None
    except httpx2.TimeoutException:
        raise StatusError(f"the gateway at {url} did not answer within {TIMEOUT_S}s") from None
    except httpx2.HTTPError as exc:
        raise StatusError(f"cannot reach {url}: {exc}") from None
    if response.status_code == 401:
        hint = f"set {TOKEN_VARIABLE}" if token is None else "the token was refused"
        raise StatusError(f"the admin listener at {url} needs its bearer token ({hint})")
    try:
        answer = response.json()
    except ValueError:
        raise StatusError(f"{url} did not answer JSON: is it a gateway's admin listener?") from None
    if not isinstance(answer, dict):
        raise StatusError(f"{url} did not answer a JSON object: is it a gateway's admin listener?")
    if response.status_code != 200:
        raise StatusError(str(answer.get("error", f"HTTP {response.status_code}"))[:500], EXIT_REFUSED)
    return answer


def format_list(answer: dict[str, Any]) -> str:
    held = answer.get("held") or []
    modes = answer.get("modes") or {}
    lines = [_held_line(entry) for entry in held] or ["nothing is held"]
    trusting = [f"{name} {mode}" for name, mode in modes.items() if mode != "off"]
    lines.append(f"trust: {', '.join(trusting) if trusting else 'off for every backend'}")
    return "\n".join(escape_controls(line) for line in lines)


def _held_line(entry: dict[str, Any]) -> str:
    state = "rejected" if entry.get("rejected_by") else "hidden" if entry.get("hidden") else "not listed now"
    reason = entry["reason"] + (f" from {entry['renamed_from']}" if entry.get("renamed_from") else "")
    changes = entry.get("changes", 1)
    parts = [
        f"{entry['id']}",
        entry["kind"],
        reason,
        state,
        f"digest {entry['digest'][:DIGEST_SHOWN]}",
        f"since {_ago(entry.get('first_seen'))}",
        f"{changes} change{'' if changes == 1 else 's'}",
    ]
    kinds = sorted({finding["kind"] for finding in entry.get("findings") or []})
    if kinds:
        parts.append(f"findings: {', '.join(kinds)}")
    return "  ".join(parts)


def format_diff(answer: dict[str, Any]) -> str:
    public = f" (public name {answer['public']})" if answer.get("public") else ""
    approved = answer.get("approved")
    lines = [
        f"{answer['kind']} {answer['id']}{public}: held: {answer['why']}",
        f"approved {approved[:DIGEST_SHOWN] if approved else '(none)'} -> held {answer['digest']}",
    ]
    if answer.get("rejected_by"):
        lines.append(f"rejected by {answer['rejected_by']}")
    findings = answer.get("findings") or []
    lines.append(f"findings: {len(findings)}" if findings else "findings: none")
    lines += [f"  {f['kind']} at {f['where'] or '(the definition)'}: {f['excerpt']}" for f in findings]
    lines.append(answer.get("diff") or "(no difference in the fields reviewed)")
    return "\n".join(escape_controls(line) for line in "\n".join(lines).splitlines())


def _ago(when: object) -> str:
    if not isinstance(when, int | float):
        return "?"
    return f"{duration(max(time.time() - when, 0.0))} ago"
