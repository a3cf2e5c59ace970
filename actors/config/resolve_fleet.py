"""[fleet] resolved (resolve.py's part for it): the Redis URL, the replica's name and the fleet keys read
from the environment or a file. Problems name the key, never a secret's value."""

from __future__ import annotations

import base64
import binascii
import os
import re
import socket
import ssl
from pathlib import Path

from actors.config.commands import shown_path
from actors.config.errors import Problem
from actors.config.fleet_schema import KEY_BYTES, MAX_KEYS, REPLICA_NAME, FleetSettings, FleetTable, RedisTls
from actors.config.fleet_schema import redis_url as redis_url_rule
from actors.config.redis_target import parse_redis_target, tls_context

KEYS_FORMAT = f"{KEY_BYTES} bytes as base64url (43 characters) or hex (64)"
MAKE_KEY = "make one with: python3 -c 'import secrets; print(secrets.token_hex(32))'"
MAX_PEM_BYTES = 1 << 20  # a CA bundle is a few hundred kB at most
TLS_KEYS = ("redis_ca_file", "redis_cert_file", "redis_key_file")


def resolve_fleet(table: FleetTable, folder: Path, problems: list[Problem]) -> FleetSettings | None:
    before = len(problems)
    url = _redis_url(table, problems)
    replica = _replica(table, problems)
    keys = _keys(table, folder, problems)
    tls = _tls(table, url, folder, problems) if url is not None else None
    if len(problems) > before or url is None or replica is None or keys is None:
        return None
    secrets = {name for name in (table.redis_url_env, table.keys_env) if name}
    return FleetSettings(
        redis_url=url,
        replica=replica,
        keys=keys,
        key_prefix=_hash_tagged(table.key_prefix, url),
        advertise_url=table.advertise_url,
        session_ttl_s=table.session_ttl_s,
        redis_timeout_s=table.redis_timeout_s,
        redis_tls=tls,
        secret_variables=frozenset(secrets),
    )


def _hash_tagged(prefix: str, url: str) -> str:
    """Under a Redis Cluster, `{prefix}`: each key's hash slot is the prefix's, so the fleet's multi-key
    scripts (and every key) live on one node."""
    return f"{{{prefix}}}" if parse_redis_target(url).kind == "cluster" else prefix


def _redis_url(table: FleetTable, problems: list[Problem]) -> str | None:
    if (table.redis_url is None) == (table.redis_url_env is None):
        problems.append(("fleet", "set one of redis_url and redis_url_env"))
        return None
    if table.redis_url is not None:
        return table.redis_url
    assert table.redis_url_env is not None
    url = os.environ.get(table.redis_url_env, "")
    if not url:
        problems.append(
            ("fleet.redis_url_env", f"environment variable {table.redis_url_env} is not set or empty")
        )
        return None
    try:
        redis_url_rule(None, None, url)
    except ValueError as exc:
        problems.append(("fleet.redis_url_env", f"the value of {table.redis_url_env} {exc}"))
        return None
    return url


def _tls(table: FleetTable, url: str, folder: Path, problems: list[Problem]) -> RedisTls | None:
    """A TLS URL's files checked (each readable PEM of its kind, the key matching the certificate) and the
    client context made; the files given with a plain URL are a mistake, not ignored."""
    given = {name: getattr(table, name) for name in TLS_KEYS if getattr(table, name) is not None}
    if not parse_redis_target(url).tls:
        for name in given:
            reason = "is for a TLS URL (rediss://, rediss+sentinel:// or rediss+cluster://); the URL is plain"
            problems.append((f"fleet.{name}", reason))
        return None
    if ("redis_cert_file" in given) != ("redis_key_file" in given):
        missing = "redis_key_file" if "redis_cert_file" in given else "redis_cert_file"
        present = "redis_cert_file" if missing == "redis_key_file" else "redis_key_file"
        problems.append((f"fleet.{present}", f"needs {missing} too (a client certificate is both)"))
        return None
    paths: dict[str, Path] = {}
    for name, written in given.items():
        path = _pem(name, written, folder, problems)
        if path is None:
            return None
        paths[name] = path
    ca, cert, key = (paths.get(name) for name in TLS_KEYS)
    steps = [("fleet.redis_ca_file", "does not load as CA certificates", (ca, None, None))] if ca else []
    steps.append(("fleet.redis_key_file", "does not load with redis_cert_file", (ca, cert, key)))
    for where, what, files in steps:
        try:
            context = tls_context(*files)
        except (ssl.SSLError, OSError) as exc:
            problems.append((where, f"{what}: {getattr(exc, 'reason', None) or exc}"))
            return None
    return RedisTls(ca_file=ca, cert_file=cert, key_file=key, context=context)


PEM_MARKS = {
    "redis_ca_file": ("-----BEGIN CERTIFICATE-----", "PEM certificates"),
    "redis_cert_file": ("-----BEGIN CERTIFICATE-----", "a PEM certificate"),
    "redis_key_file": ("PRIVATE KEY-----", "a PEM private key"),
}


def _pem(name: str, written: Path, folder: Path, problems: list[Problem]) -> Path | None:
    """The file's absolute path once it reads as PEM of its kind, else None and the problem."""
    path = (folder / written.expanduser()).resolve()
    shown = shown_path(written, path)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        problems.append((f"fleet.{name}", f"cannot read {shown}: {exc.strerror or exc}"))
        return None
    mark, kind = PEM_MARKS[name]
    if len(data) > MAX_PEM_BYTES:
        problems.append((f"fleet.{name}", f"{shown} is larger than {MAX_PEM_BYTES >> 20} MiB; not {kind}"))
        return None
    if mark.encode() not in data:
        problems.append((f"fleet.{name}", f"{shown} is not {kind}"))
        return None
    return path


def _replica(table: FleetTable, problems: list[Problem]) -> str | None:
    if table.replica is not None and table.replica_env is not None:
        problems.append(("fleet", "set at most one of replica and replica_env"))
        return None
    if table.replica is not None:
        return table.replica
    if table.replica_env is not None:
        name = os.environ.get(table.replica_env, "")
        if REPLICA_NAME.fullmatch(name) is None:
            reason = "is not set" if not name else "must be 1 to 32 letters, digits, '_', '.' or '-'"
            problems.append(("fleet.replica_env", f"environment variable {table.replica_env} {reason}"))
            return None
        return name
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:24] or "host"
    return f"{host}-{os.getpid()}"


def _keys(table: FleetTable, folder: Path, problems: list[Problem]) -> tuple[bytes, ...] | None:
    if (table.keys_env is None) == (table.keys_file is None):
        problems.append(("fleet", "set one of keys_env and keys_file (the fleet keys: the first seals)"))
        return None
    if table.keys_env is not None:
        where, text = "fleet.keys_env", os.environ.get(table.keys_env, "")
        if not text.strip():
            reason = f"environment variable {table.keys_env} is not set or empty (the fleet keys; {MAKE_KEY})"
            problems.append((where, reason))
            return None
    else:
        assert table.keys_file is not None
        where, path = "fleet.keys_file", (folder / table.keys_file.expanduser()).resolve()
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not ASCII text"
            problems.append((where, f"cannot read {shown_path(table.keys_file, path)}: {reason}"))
            return None
    return parse_keys(text, where, problems)


def parse_keys(text: str, where: str, problems: list[Problem]) -> tuple[bytes, ...] | None:
    """Keys separated by whitespace or commas ('#' starts a comment to the end of its line)."""
    words = [word for line in text.splitlines() for word in re.split(r"[\s,]+", line.split("#")[0]) if word]
    if not words:
        problems.append((where, f"no key; give one or more keys of {KEYS_FORMAT} ({MAKE_KEY})"))
        return None
    if len(words) > MAX_KEYS:
        problems.append((where, f"{len(words)} keys; at most {MAX_KEYS} (remove keys no longer in use)"))
        return None
    keys = []
    for number, word in enumerate(words, 1):
        key = _key(word)
        if key is None:
            problems.append((where, f"key {number} of {len(words)} is not {KEYS_FORMAT}"))
            return None
        keys.append(key)
    if len(set(keys)) != len(keys):
        problems.append((where, "a key is listed twice"))
        return None
    return tuple(keys)


def _key(word: str) -> bytes | None:
    if re.fullmatch(r"[0-9a-fA-F]{64}", word):
        return bytes.fromhex(word)
    if re.fullmatch(r"[A-Za-z0-9_-]{43}=?", word):
        try:
            raw = base64.urlsafe_b64decode(word.rstrip("=") + "=")
        except (binascii.Error, ValueError):
            return None
        return raw if len(raw) == KEY_BYTES else None
    return None
