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
from typing import Any

from actors.config.fleet_schema import FleetSettings
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
