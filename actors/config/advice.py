"""What `mcp-gateway check` warns of in a config it accepts: settings that work but that an operator most
likely did not mean, each as `FILE: key: warning: reason`. A warning never fails the check (exit 0)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Final
from urllib.parse import urlsplit

from actors.config.errors import ConfigProblem, Problem
from actors.config.listener_schema import LOOPBACK_HOSTS
from actors.config.route_schema import RouteAuth
from actors.config.schema import Config
from actors.config.secret import SecretSource
from actors.runtime.redact import MIN_CHARS
from actors.trust import TrustMode

# A plain value under such a name is most likely a credential that should be a secret reference.
CREDENTIAL_NAME: Final = re.compile(
    r"(?i)^(?:authorization|proxy-authorization|cookie)$|token|secret|passw(?:or)?d|api[-_]?key|private[-_]?key"
    r"|credential"
)
REFERENCE: Final = '{ env = "NAME" } or { file = "..." }'


def advice(config: Config) -> list[ConfigProblem]:
    """The warnings for `config`, in file order."""
    found = []
    for table, listener in (("websocket", config.websocket), ("http", config.http)):
        if listener is not None and listener.host not in LOOPBACK_HOSTS and not listener.checks_tokens:
            reason = (
                f"warning: {listener.host} is reachable from other machines and [{table}.auth] is absent,"
                " so anyone who can reach the port may call every tool: add [{table}.auth] (see"
                " config/auth.toml) or listen on 127.0.0.1"
            ).replace("{table}", table)
            found.append(ConfigProblem(str(config.path), f"{table}.host", reason))
    trusting = [name for name, mode in config.trust_modes().items() if mode is not TrustMode.OFF]
    if trusting and (config.admin is None or config.admin.token is None):
        reason = (
            f"warning: [trust] holds changed definitions of {', '.join(trusting)}, but without [admin]"
            " token_env nobody can review them (`mcp-gateway trust` needs the admin listener's token)"
        )
        found.append(ConfigProblem(str(config.path), "admin.token_env", reason))
    issuers = any(table is not None and table.oauth is not None for table in (config.websocket, config.http))
    for index, route in enumerate(config.routes):
        if route.auth != RouteAuth() and not issuers:
            reason = (
                "warning: no listener's [NAME.auth] trusts issuers, so the route is no OAuth resource of its"
                " own and these keys do nothing (add [[http.auth.issuers]] or remove [routes.auth])"
            )
            found.append(ConfigProblem(str(config.path), f"routes[{index}].auth", reason))
    found += [
        ConfigProblem(str(config.path), key, f"warning: {reason}") for key, reason in secret_advice(config)
    ]
    return found


def secret_advice(config: Config) -> Iterator[Problem]:
    """What `check` says of secrets: a literal, a file others may read, a value too short for the
    redactor, a credential written as a plain string, a password in a URL."""
    for key, secret in config.secrets():
        if secret.source is SecretSource.VALUE:
            yield (
                key,
                f"a secret written in the config file: whoever reads the file has it; prefer {REFERENCE}",
            )
        if secret.path is not None:
            yield from _file_advice(key, secret.where, secret.path)
        if secret.resolved and len(secret.reveal()) < MIN_CHARS:
            yield (
                key,
                f"{secret.name} is shorter than {MIN_CHARS} characters: the redactor does not look for it",
            )
    for index, backend in enumerate(config.backends):
        for table in ("headers", "env"):
            for name, value in getattr(backend, table, {}).items():
                if isinstance(value, str) and CREDENTIAL_NAME.search(name):
                    reason = (
                        f"a plain string; if it is a credential, write it as {REFERENCE}, kept out of logs"
                    )
                    yield f"backends[{index}].{table}.{name}", reason
        if backend.url is not None and _has_password(backend.url):
            yield (
                f"backends[{index}].url",
                "holds a password; send the credential in headers, as a secret reference",
            )
        token_url = getattr(getattr(backend, "auth", None), "token_url", None)
        if token_url is not None and _in_clear(token_url):
            yield (
                f"backends[{index}].auth.token_url",
                "plain http to another machine: the client secret and every token cross the network in"
                " clear; use https",
            )


def _file_advice(key: str, written: str, path: os.PathLike[str]) -> Iterator[Problem]:
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return
    if mode & 0o077:
        yield (
            key,
            f"secret file {written!r} may be read by its group or others (mode {mode:04o}): chmod 600 it",
        )


def _in_clear(url: str) -> bool:
    """An http:// URL to a host other than this machine's loopback."""
    parts = urlsplit(url)
    return parts.scheme == "http" and (parts.hostname or "") not in LOOPBACK_HOSTS


def _has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False
