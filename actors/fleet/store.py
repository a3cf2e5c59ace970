"""The replica's link to Redis (through coredis, which runs on Trio), and whether Redis answers now.

Every command runs under `redis_timeout_s`. A command refused or timed out marks Redis unavailable: from
then on commands fail at once (StoreUnavailableError) instead of each request waiting on a dead link, the
replica serves alone, and a watcher pings every CHECK_DOWN_S until Redis answers again; then each
catch-up callback runs (what was kept locally meanwhile is written). The state is logged at each change and
read by /readyz and /status.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import attrs
import trio
from loguru import logger

from actors.config.fleet_schema import FleetSettings
from actors.fleet.redis_client import link_failure, open_redis

CHECK_UP_S: Final = 1.0  # a ping while Redis answers: notices a loss (or a restart, empty) between requests
CHECK_DOWN_S: Final = 0.5  # a ping while it does not: how soon a replica catches up once it is back
# A replica's marker outlives it by this much at most (each check sets it again): a replica name that never
# comes back (the default names one process: host-pid) leaves no key behind. A replica away from Redis
# longer than this finds its marker gone and writes what it keeps again, as after a Redis restart.
MARKER_TTL_S: Final = 3600
_T = TypeVar("_T")


@functools.cache
def link_errors() -> tuple[type[BaseException], ...]:
    """What a dead or closing link raises: coredis' errors, the socket's, and those of anyio's streams inside
    coredis. Imported when first needed: the `fleet` extra, so every module of the package imports without
    it."""
    import anyio
    import coredis.exceptions

    return (
        coredis.exceptions.RedisError,
        OSError,
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
    )


class StoreUnavailableError(Exception):
    """Redis did not answer (refused, timed out, or known to be down): the replica serves alone."""


@attrs.define(eq=False, kw_only=True)
class FleetStore:
    """Owns: the Redis client and its connection pool (opened and closed by `run`); `available`.
    Receives: commands (`command`) from any task of the replica.
    Sends: nothing; calls each `on_back` callback when Redis answers again after it did not.
    Stops when: cancelled with the gateway's root; the pool closes with it.
    Errors: StoreUnavailableError from `command`; nothing escapes `run`.
    """

    settings: FleetSettings
    available: bool = False
    reason: str = "not connected yet"  # why it is unavailable, for /status and the log
    on_back: list[Callable[[], Awaitable[None]]] = attrs.field(factory=list)
    _client: Any = None
    _down: trio.Event = attrs.field(factory=trio.Event)  # set when a command finds Redis gone
    _up: trio.Event = attrs.field(factory=trio.Event)  # set while Redis answers
    _emptied: bool = False  # Redis answers without this replica's marker: it lost what it held

    async def run(
        self,
        users: Callable[..., Awaitable[None]] | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The link, open until cancelled; `users` (started in a nursery inside it, with the watcher) end
        before the link closes, so a pub/sub connection is closed while its pool still exists."""
        async with open_redis(self.settings) as client:
            self._client = client
            await self._check(mark=True)
            if self.available:
                self._up.set()
            else:
                logger.warning(
                    "fleet: Redis unavailable at start ({}); serving alone until it answers", self.reason
                )
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch)
                    if users is not None:
                        await nursery.start(users)
                    task_status.started()
            finally:
                self._client = None

    def client(self) -> Any:
        """The coredis client (while `run` runs), for the pub/sub connection."""
        assert self._client is not None, "the store is not running"
        return self._client

    async def command(self, run: Callable[[Any], Awaitable[_T]], *, parting: bool = False) -> _T:
        """`run(client)` under the timeout; StoreUnavailableError when Redis is down or does not answer.
        `parting`: a last word at shutdown, when the link may already be closing: a failure says nothing
        about Redis."""
        if not self.available or self._client is None:
            raise StoreUnavailableError(self.reason)
        try:
            with trio.fail_after(self.settings.redis_timeout_s):
                return await run(self._client)
        except (*link_errors(), trio.TooSlowError) as exc:
            why = link_failure(exc, self.settings.redis_tls)
            if not parting:
                self._mark_down(why)
            raise StoreUnavailableError(why) from None

    async def _watch(self) -> None:
        while True:
            if self.available:
                with trio.move_on_after(CHECK_UP_S):
                    await self._down.wait()
            else:
                await trio.sleep(CHECK_DOWN_S)
            was = self.available
            await self._check()
            if self.available and (not was or self._emptied):
                logger.info("fleet: Redis answers {}; catching up", "empty" if was else "again")
                for callback in list(self.on_back):
                    await callback()
                await self._check(mark=True)
            if self.available:
                self._up.set()

    async def _check(self, *, mark: bool = False) -> None:
        """A ping, and whether Redis still holds this replica's marker (gone: it restarted empty, and
        what this replica keeps must be written again); with `mark`, the marker set."""
        marker = f"{self.settings.key_prefix}:marker:{self.settings.replica}"
        try:
            with trio.fail_after(self.settings.redis_timeout_s):
                await self._client.ping()
                if mark:
                    await self._client.set(marker, b"1", ex=MARKER_TTL_S)
                self._emptied = not await self._client.expire(marker, MARKER_TTL_S)  # held, kept on
        except (*link_errors(), trio.TooSlowError) as exc:
            self._mark_down(link_failure(exc, self.settings.redis_tls))
        else:
            self.available, self.reason = True, ""
            self._down = trio.Event()

    async def wait_available(self) -> None:
        """Until Redis answers and what was kept meanwhile is written (at once when it does now)."""
        await self._up.wait()

    def _mark_down(self, why: str) -> None:
        if self.available:
            logger.warning("fleet: Redis unavailable ({}); serving alone until it answers", why)
        self.available, self.reason = False, why
        self._down.set()
        if self._up.is_set():
            self._up = trio.Event()
