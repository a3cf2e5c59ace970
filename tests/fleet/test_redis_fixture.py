"""The fleet tier's own ground: a real redis-server, reached with coredis under Trio."""

from __future__ import annotations

import coredis
from fleet_support import RedisServer


async def test_redis_server_answers_coredis_under_trio_and_comes_back(redis_server: RedisServer) -> None:
    client = coredis.Redis.from_url(redis_server.url, connect_timeout=1.0, stream_timeout=1.0)
    async with client:
        await client.set("fleet:probe", b"1", ex=10)
        assert await client.get("fleet:probe") == b"1"
        redis_server.stop()
        try:
            await client.get("fleet:probe")
        except coredis.exceptions.ConnectionError:
            pass
        else:
            raise AssertionError("a stopped redis-server answered")
        redis_server.start()
        assert await client.ping() == b"PONG"
