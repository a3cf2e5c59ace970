"""`mcp-gateway token --config F --sub NAME [--ttl 1h] [--scope S ...] [--listener http|websocket]`: a bearer
token (JWT, HS256) that F's listener accepts, signed with the secret its `jwt_secret_env` names, with the
audience and issuer it checks. The token alone goes to stdout; any problem is one line on stderr, exit 2.

Only the listeners' [NAME.auth] tables are read (load.load_auth_tables), so the rest of the file need not
load where the token is made; the secret is read as the listener reads it (resolve.resolve_auth).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Final

from actors.config.errors import ConfigError, ConfigProblem, Problem
from actors.config.listener_schema import AuthTable
from actors.config.load import load_auth_tables
from actors.config.resolve import resolve_auth

EXIT_REFUSED: Final = 2  # as a bad config: nothing a retry would change
LISTENERS: Final = ("websocket", "http")
TTL_UNITS_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
TTL_PATTERN: Final = re.compile(r"([1-9][0-9]{0,8})([smhd])")
MAX_TTL_S: Final = 366 * 86400  # a longer-lived bearer token is a password nobody rotates
MAX_SUBJECT_CHARS: Final = 256  # the subject is on every log line of its sessions
# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by spaces
SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
HS256_MIN_KEY_BYTES: Final = 32  # RFC 7518 section 3.2


class TokenError(Exception):
    """Why no token was made: one line for the operator."""


def add_parser(commands: Any, default_config: str) -> None:
    token = commands.add_parser(
        "token", help="print a bearer token (JWT, HS256) that the config's [websocket] or [http] accepts"
    )
    token.add_argument(
        "--config", default=default_config, help=f"TOML config file (default {default_config})"
    )
    token.add_argument("--sub", required=True, help="the token's subject: who the client is")
    token.add_argument("--ttl", default="1h", help="lifetime: 30s, 15m, 1h (default) or 7d; at most 366d")
    token.add_argument(
        "--scope", action="append", default=[], help='a scope; repeat it, or give several: --scope "a b"'
    )
    token.add_argument(
        "--listener", choices=LISTENERS, help="whose [NAME.auth] to sign for (needed when the two differ)"
    )


def run(args: argparse.Namespace) -> int:
    try:
        print(make_token(Path(args.config), args.sub, args.ttl, args.scope, args.listener))
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_REFUSED
    except TokenError as exc:
        print(f"mcp-gateway token: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def make_token(
    config: Path, subject: str, ttl: str, scopes: list[str], listener: str | None, now: float | None = None
) -> str:
    """The signed token, or TokenError / ConfigError saying why not."""
    lifetime_s, scope = parse_ttl(ttl), parse_scopes(scopes)
    _check_subject(subject)
    name, table = _choose_listener(config, load_auth_tables(config), listener)
    if table.jwt_secret_env is None and table.jwt_public_key_file is not None:
        reason = (
            "verifies RS256/ES256 tokens against jwt_public_key_file: sign them with its private key "
            "(this command makes HS256 tokens from jwt_secret_env)"
        )
        raise ConfigError([ConfigProblem(str(config), f"{name}.auth", reason)])
    problems: list[Problem] = []
    auth = resolve_auth(table, f"{name}.auth", config.resolve().parent, problems)
    if auth is None:
        raise ConfigError([ConfigProblem(str(config), key, reason) for key, reason in problems])
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {"sub": subject, "iat": issued, "exp": issued + lifetime_s}
    if auth.audience is not None:
        claims["aud"] = auth.audience
    if auth.issuer is not None:
        claims["iss"] = auth.issuer
    if scope:
        claims["scope"] = scope
    if len(auth.key.encode()) < HS256_MIN_KEY_BYTES:
        print(
            f"mcp-gateway token: warning: {auth.secret_env} holds fewer than {HS256_MIN_KEY_BYTES} bytes; "
            "a short HS256 secret can be guessed",
            file=sys.stderr,
        )
    with warnings.catch_warnings():  # said once above, in the operator's terms
        warnings.simplefilter("ignore")
        import jwt  # here: the other commands start without it

        return jwt.encode(claims, auth.key, algorithm="HS256")


def parse_ttl(text: str) -> int:
    """Seconds from 30s, 15m, 1h or 7d."""
    match = TTL_PATTERN.fullmatch(text)
    if match is None:
        raise TokenError(f"--ttl {text!r}: expected a whole number and a unit: 30s, 15m, 1h or 7d")
    seconds = int(match[1]) * TTL_UNITS_S[match[2]]
    if seconds > MAX_TTL_S:
        raise TokenError(f"--ttl {text!r}: at most 366d")
    return seconds


def parse_scopes(values: list[str]) -> str:
    """The `scope` claim: every scope given, in order, once each, space-separated."""
    scopes: dict[str, None] = {}
    for value in values:
        for scope in value.split(" "):
            if not scope:
                continue
            if not SCOPE_TOKEN.fullmatch(scope):
                raise TokenError(f"--scope {scope!r}: printable ASCII only, without '\"' or '\\'")
            scopes[scope] = None
    return " ".join(scopes)


def _check_subject(subject: str) -> None:
    if not subject.strip():
        raise TokenError("--sub must not be empty")
    if len(subject) > MAX_SUBJECT_CHARS:
        raise TokenError(f"--sub is longer than {MAX_SUBJECT_CHARS} characters")
    if any(not character.isprintable() for character in subject):
        raise TokenError("--sub must not hold control characters")


def how_to_add(listener: str) -> str:
    return (
        f'To require tokens, add [{listener}.auth] with jwt_secret_env = "MCP_GATEWAY_JWT_SECRET" (a variable'
        " holding at least 32 random bytes) and restart the gateway; config/auth.toml is such a config"
    )


def _choose_listener(config: Path, tables: dict[str, AuthTable], wanted: str | None) -> tuple[str, AuthTable]:
    if wanted is not None:
        if wanted not in tables:
            raise TokenError(
                f"{config} has no [{wanted}.auth] table: that listener takes no token. {how_to_add(wanted)}"
            )
        return wanted, tables[wanted]
    if not tables:
        raise TokenError(
            f"{config} has no [websocket.auth] or [http.auth] table: no listener takes a token. "
            + how_to_add("http")
        )
    if len(set(tables.values())) > 1:
        raise TokenError(
            f"{config}: [websocket.auth] and [http.auth] differ: pass --listener websocket or --listener http"
        )
    name = next(iter(tables))
    return name, tables[name]
