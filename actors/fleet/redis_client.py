"""The coredis client for [fleet]'s URL: one Redis, the primary a Sentinel service names, or a Cluster.

Every form gives a client with the same commands, Lua scripts and `pubsub()`, so the store and its users do
not know which it is. A Sentinel client asks the sentinels for the primary on each new connection: after a
failover the store's link is refused or broken, marked down, and its next ping connects to the new primary.
A Cluster's keys all carry the fleet's `{key_prefix}` hash tag (resolve_fleet.py), so every key and
multi-key script of the fleet lands in one hash slot. A TLS URL's every connection (a cluster's nodes, the
sentinels and the primary they name) uses the context [fleet] made (resolve_fleet.py): the server's
certificate and name checked, the client certificate shown when one is configured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from actors.config.fleet_schema import FleetSettings, RedisTls
from actors.config.redis_target import parse_redis_target


@asynccontextmanager
async def open_redis(settings: FleetSettings) -> AsyncIterator[Any]:
    """The client, open while the block runs (its pools, and the sentinels' connections, closed after)."""
    import coredis  # the `fleet` extra
    from coredis.connection import TCPLocation

    target = parse_redis_target(settings.redis_url)
    link: dict[str, Any] = {
        "connect_timeout": settings.redis_timeout_s,
        "stream_timeout": settings.redis_timeout_s,
    }
    if settings.redis_tls is not None:
        link["ssl_context"] = settings.redis_tls.context
    if target.kind == "single":
        async with coredis.Redis.from_url(target.url, **link) as client:
            yield client
        return
    nodes = [TCPLocation(host, port) for host, port in target.nodes]
    auth = {"username": target.username, "password": target.password}
    if target.kind == "cluster":
        async with coredis.RedisCluster(startup_nodes=nodes, **auth, **link) as cluster:
            yield cluster
        return
    sentinel = coredis.Sentinel(nodes, sentinel_kwargs=dict(link), **link)
    async with sentinel, sentinel.primary_for(target.service, db=target.db, **auth) as primary:
        yield primary


MAX_REASON_CHARS: Final = 400
TLS_RESET_HINT: Final = "; a TLS server resets a client whose certificate it does not accept"


def link_failure(exc: BaseException, tls: RedisTls | None) -> str:
    """Why the link failed, for /status and the log: the error and its first cause that says something
    (coredis reports a link the server closed as "Connection lost"); over TLS a reset gets the likely why,
    since a server that asks for a client certificate closes a link without one after the handshake."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    while cause is not None and not str(cause):
        cause = cause.__cause__ or cause.__context__
    if cause is not None:
        text += f" ({type(cause).__name__}: {cause})"
        if tls is not None and isinstance(cause, (ConnectionResetError, BrokenPipeError)):
            text += TLS_RESET_HINT + (
                "" if tls.cert_file else " (none given: redis_cert_file, redis_key_file)"
            )
    return text[:MAX_REASON_CHARS]
