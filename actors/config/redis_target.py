"""Which Redis a fleet uses, read from [fleet]'s URL (no coredis here: config stays import-light).

Three forms, one key (`redis_url`, or the variable `redis_url_env` when the URL holds a password):
- `redis://`, `rediss://`, `unix://`: one Redis, opened by coredis' own URL parsing;
- `redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]`: the primary Sentinel names for
  `service` (the password is the data nodes'; the sentinels are asked without one);
- `redis+cluster://[[user]:password@]host:port[,host:port...]`: a Redis Cluster, any of its nodes to start.
`rediss://`, `rediss+sentinel://` (the sentinels too) and `rediss+cluster://` speak TLS, always checking the
server's certificate and name (`tls_context`: [fleet]'s redis_ca_file, redis_cert_file + redis_key_file);
so a rediss:// URL takes no `ssl_*` query argument, which coredis would read to weaken that.
`parse_redis_target` raises ValueError with the reason `check` shows after "fleet.redis_url: ".
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Final, Literal
from urllib.parse import unquote

import attrs

PLAIN_SCHEMES: Final = ("redis://", "rediss://", "unix://")
SENTINEL_SCHEMES: Final = ("redis+sentinel://", "rediss+sentinel://")
CLUSTER_SCHEMES: Final = ("redis+cluster://", "rediss+cluster://")
TLS_SCHEMES: Final = ("rediss://", "rediss+sentinel://", "rediss+cluster://")
MAX_URL_CHARS: Final = 4096
MAX_NODES: Final = 16  # sentinels or cluster seeds listed; more is a list nobody keeps
_HOST: Final = re.compile(r"[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
_SERVICE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SCHEMES_REASON: Final = (
    "must start with redis://, rediss://, unix://, redis+sentinel://, rediss+sentinel://, redis+cluster:// "
    "or rediss+cluster://"
)


@attrs.frozen(kw_only=True)
class RedisTarget:
    """A parsed fleet URL. `url` is kept for the plain form (coredis parses it); the password never shows in
    repr."""

    kind: Literal["single", "sentinel", "cluster"]
    tls: bool = False
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
    tls = url.startswith(TLS_SCHEMES)
    if url.startswith(PLAIN_SCHEMES):
        query = url.partition("?")[2].partition("#")[0]
        if tls and any(unquote(argument).lower().startswith("ssl") for argument in query.split("&")):
            raise ValueError(
                "takes no ssl_* query argument: give redis_ca_file, redis_cert_file and redis_key_file "
                "(the server's certificate and name are always checked)"
            )
        return RedisTarget(kind="single", tls=tls, url=url)
    for schemes, kind in ((SENTINEL_SCHEMES, "sentinel"), (CLUSTER_SCHEMES, "cluster")):
        for scheme in schemes:
            if url.startswith(scheme):
                return _multi(url[len(scheme) :], kind, tls)  # type: ignore[arg-type]
    raise ValueError(SCHEMES_REASON)


def tls_context(ca_file: Path | None, cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext:
    """The client's TLS: the server's certificate checked against `ca_file` (else the system's CAs) and its
    name against the URL's host; a client certificate when both files are given. ssl.SSLError or OSError
    when a file does not load (an encrypted key too: no passphrase is asked)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None and key_file is not None:
        context.load_cert_chain(str(cert_file), str(key_file), password=lambda: b"")
    return context


def _multi(rest: str, kind: Literal["sentinel", "cluster"], tls: bool) -> RedisTarget:
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
        return RedisTarget(kind=kind, tls=tls, nodes=nodes, username=username, password=password)
    if not parts or _SERVICE.fullmatch(parts[0]) is None:
        raise ValueError("must name the Sentinel service after the hosts: redis+sentinel://host:port/service")
    db = 0
    if len(parts) > 2 or (len(parts) == 2 and not (parts[1].isdigit() and len(parts[1]) <= 2)):
        raise ValueError("after the service only a database number (0 to 99) may follow")
    if len(parts) == 2:
        db = int(parts[1])
    return RedisTarget(
        kind=kind, tls=tls, nodes=nodes, service=parts[0], db=db, username=username, password=password
    )


def _node(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or _HOST.fullmatch(host) is None:
        raise ValueError(f"{text!r} is not host:port")
    if not port.isdigit() or not 0 < int(port) < 65536 or len(port) > 5:
        raise ValueError(f"{text!r} has no port from 1 to 65535")
    return host.strip("[]"), int(port)
