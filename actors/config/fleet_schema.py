"""[fleet]: several gateway replicas behind one load balancer, sharing sessions through Redis.

Without a [fleet] table nothing changes and nothing of actors.fleet (nor coredis) is imported. The table
names where the secrets come from, never the secrets: the Redis URL (it may hold a password; one Redis, a
Sentinel service or a Cluster: redis_target.py) from `redis_url` or the variable `redis_url_env`; the fleet
keys (AES-256-GCM, 32 bytes each) from the variable `keys_env` or the file `keys_file`, as a list where the
first seals and every one opens (rotation: add the new key first, remove the old one once nothing it sealed
is alive). resolve_fleet.py reads them. A TLS URL (rediss://, rediss+sentinel://, rediss+cluster://) may name
a CA bundle (`redis_ca_file`) and a client certificate (`redis_cert_file` + `redis_key_file`).
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Final

import attrs
from attrs.validators import optional

from actors.config.checks import at_least, environment_name, positive, rule
from actors.config.redis_target import parse_redis_target

REPLICA_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,32}")
KEY_BYTES: Final = 32  # AES-256-GCM
MAX_KEYS: Final = 8  # a rotation needs two; more is a list nobody prunes

replica_name: Final = rule(
    lambda value: value is None or REPLICA_NAME.fullmatch(value) is not None,
    "must be 1 to 32 letters, digits, '_', '.' or '-'",
)


def redis_url(_instance: object, _attribute: object, value: str | None) -> None:
    """One Redis, a Sentinel service or a Cluster (redis_target.py): a bad URL's reason, never the URL."""
    if value is not None:
        parse_redis_target(value)


http_url: Final = rule(
    lambda value: value is None or (value.startswith(("http://", "https://")) and len(value) <= 2048),
    "must be an http:// or https:// URL",
)
key_prefix: Final = rule(
    lambda value: re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value) is not None,
    "must be 1 to 64 letters, digits, '_', '.', ':' or '-'",
)


@attrs.frozen(kw_only=True)
class FleetTable:
    """[fleet] as written: where the Redis URL and the keys come from, never the keys themselves."""

    redis_url: str | None = attrs.field(default=None, validator=redis_url, repr=False)
    redis_url_env: str | None = attrs.field(default=None, validator=optional(environment_name))
    # this replica's name in the ids it seals; unset: replica_env's value, else "<host>-<pid>"
    replica: str | None = attrs.field(default=None, validator=replica_name)
    replica_env: str | None = attrs.field(default=None, validator=optional(environment_name))
    keys_env: str | None = attrs.field(default=None, validator=optional(environment_name))
    keys_file: Path | None = None  # relative to the config file; one key per line, '#' comments
    # with a TLS URL: the CA bundle the server's certificate is checked against (unset: the system's), and
    # a client certificate (both or neither); relative to the config file, PEM
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None
    key_prefix: str = attrs.field(default="mcp-gateway", validator=key_prefix)  # several fleets, one Redis
    # where the other replicas reach this one's [http] listener (a retry forwarded to its parked call);
    # unset: the listener's own URL (right when replicas share a host or the listener binds a routable host)
    advertise_url: str | None = attrs.field(default=None, validator=http_url)
    # a session's facts stay in Redis this long after its last request seen by the replica that holds it
    session_ttl_s: float = attrs.field(default=3600.0, validator=at_least(10))
    # one Redis command's longest wait; past it (or refused) the replica serves alone until Redis answers
    redis_timeout_s: float = attrs.field(default=1.0, validator=positive)


@attrs.frozen(kw_only=True)
class RedisTls:
    """A TLS URL's files (absolute) and the client context made of them (once, when the config loads: a
    reload compares the files, not the context)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    context: ssl.SSLContext = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class FleetSettings:
    """[fleet] loaded: the URL and keys read (never logged, never repr'd), the replica named."""

    redis_url: str = attrs.field(repr=False)
    replica: str
    keys: tuple[bytes, ...] = attrs.field(repr=False)  # the first seals, each opens
    key_prefix: str = "mcp-gateway"
    advertise_url: str | None = None
    session_ttl_s: float = 3600.0
    redis_timeout_s: float = 1.0
    redis_tls: RedisTls | None = None  # set exactly when the URL speaks TLS
    secret_variables: frozenset[str] = frozenset()  # where the URL and keys came from: no backend sees them
