"""Which Redis a fleet uses, read from [fleet]'s URL (no coredis here: config stays import-light).

Three forms, one key (`redis_url`, or the variable `redis_url_env` when the URL holds a password):
- `redis://`, `rediss://`, `unix://`: one Redis, opened by coredis' own URL parsing;
- `redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]`: the primary Sentinel names for
  `service` (the password is the data nodes'; the sentinels are asked without one);
- `redis+cluster://[[user]:password@]host:port[,host:port...]`: a Redis Cluster, any of its nodes to start.
`parse_redis_target` raises ValueError with the reason `check` shows after "fleet.redis_url: ".
"""

from __future__ import annotations

import re
from typing import Final, Literal
from urllib.parse import unquote

import attrs

PLAIN_SCHEMES: Final = ("redis://", "rediss://", "unix://")
SENTINEL_SCHEME: Final = "redis+sentinel://"
CLUSTER_SCHEME: Final = "redis+cluster://"
MAX_URL_CHARS: Final = 4096
MAX_NODES: Final = 16  # sentinels or cluster seeds listed; more is a list nobody keeps
_HOST: Final = re.compile(r"[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
_SERVICE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SCHEMES_REASON: Final = "must start with redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://"


@attrs.frozen(kw_only=True)
class RedisTarget:
    """A parsed fleet URL. `url` is kept for the plain form (coredis parses it); the password never shows in
    repr."""

    kind: Literal["single", "sentinel", "cluster"]
    url: str = attrs.field(default="", repr=False)
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)


def parse_redis_target(url: str) -> RedisTarget:
    if not isinstance(url, str):
        raise ValueError("must be a string")
    if len(url) > MAX_URL_CHARS or any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise ValueError(f"must be at most {MAX_URL_CHARS} characters, without spaces or control characters")
    if url.startswith(PLAIN_SCHEMES):
        return RedisTarget(kind="single", url=url)
    for scheme, kind in ((SENTINEL_SCHEME, "sentinel"), (CLUSTER_SCHEME, "cluster")):
        if url.startswith(scheme):
            return _multi(url[len(scheme) :], kind)  # type: ignore[arg-type]
    raise ValueError(SCHEMES_REASON)


def _multi(rest: str, kind: Literal["sentinel", "cluster"]) -> RedisTarget:
    if "?" in rest or "#" in rest:
        raise ValueError(f"a {kind} URL takes no query or fragment")
    username = password = None
    if "@" in rest:
        credentials, _, rest = rest.rpartition("@")
        user, colon, secret = credentials.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
        if password is None:  # "user@" alone: Redis' AUTH takes a password; redis:// reads it the same way
            username, password = None, unquote(user)
    hosts, _, path = rest.partition("/")
    nodes = tuple(_node(part) for part in hosts.split(","))
    if len(nodes) > MAX_NODES:
        raise ValueError(f"lists more than {MAX_NODES} nodes")
    parts = [part for part in path.split("/")] if path else []
    if kind == "cluster":
        if parts and parts != [""]:
            raise ValueError("a cluster URL names no database (a Redis Cluster has only db 0)")
        return RedisTarget(kind=kind, nodes=nodes, username=username, password=password)
    if not parts or _SERVICE.fullmatch(parts[0]) is None:
        raise ValueError("must name the Sentinel service after the hosts: redis+sentinel://host:port/service")
    db = 0
    if len(parts) > 2 or (len(parts) == 2 and not (parts[1].isdigit() and len(parts[1]) <= 2)):
        raise ValueError("after the service only a database number (0 to 99) may follow")
    if len(parts) == 2:
        db = int(parts[1])
    return RedisTarget(kind=kind, nodes=nodes, service=parts[0], db=db, username=username, password=password)


def _node(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or _HOST.fullmatch(host) is None:
        raise ValueError(f"{text!r} is not host:port")
    if not port.isdigit() or not 0 < int(port) < 65536 or len(port) > 5:
        raise ValueError(f"{text!r} has no port from 1 to 65535")
    return host.strip("[]"), int(port)
