"""Fleet-wide [limits]: the rate buckets (GCRA) and in-flight caps of every replica added up in Redis by two
Lua scripts, so a caller spreading calls over replicas meets one limit.

Admission stays local and synchronous (a call never waits on Redis, nor fails when Redis is down). Every
SYNC_S each replica sends what it admitted per key since the last sync; the GCRA script adds it to the
key's shared theoretical arrival time (on Redis' clock, `TIME`) and answers how far ahead of now that TAT
is, which moves this replica's TAT forward: what the others admitted counts here. The in-flight script
stores this replica's count per key in one hash (with an expiry, so a replica that died stops counting
after INFLIGHT_TTL_S) and answers the others' sum for every key in flight anywhere, which counts against
the local cap. A caller can so pass a
limit by at most one burst per replica within one sync. Rate keys are digests of the caller keys; the
in-flight hash names the caller keys themselves (an address or a principal, as the limiter keys them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

import attrs
import trio

from actors.config.fleet_schema import FleetSettings
from actors.fleet.store import FleetStore, StoreUnavailableError
from actors.limits import Limiter
from actors.limits.gcra import RateBuckets
from actors.limits.inflight import InFlightCaps

SYNC_S: Final = 0.1  # how stale a replica's view of the others may be
INFLIGHT_TTL_S: Final = 3.0  # a replica's in-flight counts outlive its last sync by this much
BATCH_KEYS: Final = 256  # keys per script call

# KEYS[i]: a bucket's shared TAT; ARGV[1]: the emission interval (s); ARGV[1+i]: calls admitted since the
# last sync. Answers, per key, how many seconds ahead of Redis' now its TAT is.
GCRA_LUA: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local ahead = {}
for i, key in ipairs(KEYS) do
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  tat = tat + tonumber(ARGV[i + 1]) * interval
  local ms = math.ceil((tat - now) * 1000)
  if ms > 0 then redis.call('SET', key, string.format('%.6f', tat), 'PX', ms) end
  ahead[i] = string.format('%.6f', tat - now)
end
return ahead
"""

# KEYS[1]: the fleet's hash "<replica>\0<key>" -> "count:expiry"; ARGV[1]: this replica; ARGV[2]: ttl (s);
# ARGV[3..]: (key, count) pairs of this replica now (0: none any more). Expired fields (a replica that died)
# are removed. Answers (key, count) pairs: the other live replicas' calls in flight per key.
INFLIGHT_LUA: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1])
local ttl = tonumber(ARGV[2])
local me = ARGV[1] .. '\0'
for i = 3, #ARGV, 2 do
  if tonumber(ARGV[i + 1]) > 0 then
    redis.call('HSET', KEYS[1], me .. ARGV[i], ARGV[i + 1] .. ':' .. (now + ttl))
  else
    redis.call('HDEL', KEYS[1], me .. ARGV[i])
  end
end
local totals = {}
local fields = redis.call('HGETALL', KEYS[1])
for j = 1, #fields, 2 do
  local field = fields[j]
  local count, expiry = string.match(fields[j + 1], '^(%d+):(%d+)$')
  if not count or tonumber(expiry) <= now then
    redis.call('HDEL', KEYS[1], field)
  elseif string.sub(field, 1, #me) ~= me then
    local key = string.sub(field, string.find(field, '\0', 1, true) + 1)
    totals[key] = (totals[key] or 0) + tonumber(count)
  end
end
if #fields > 0 then redis.call('EXPIRE', KEYS[1], ttl * 10) end
local out = {}
for key, total in pairs(totals) do
  out[#out + 1] = key
  out[#out + 1] = total
end
return out
"""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@attrs.define(eq=False, kw_only=True)
class FleetLimits:
    """Owns: the scripts and the keys this replica reported in flight last time.
    Receives: nothing; every SYNC_S it reads the limiter's tables.
    Sends: the scripts' answers into the limiter's tables (TATs moved forward, the others' counts).
    Stops when: cancelled with the Redis link.
    Errors: none escape; while Redis is down the limits are this replica's alone (and what was admitted
        meanwhile is not sent later: no debt lands on callers when Redis returns).
    """

    settings: FleetSettings
    store: FleetStore
    limiter: Limiter
    _reported: set[str] = attrs.field(factory=set)  # keys with calls in flight here at the last sync
    _scripts: dict[str, Any] = attrs.field(factory=dict)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            for buckets in (self.limiter.rates, self.limiter.requests):
                if buckets is not None:
                    buckets.shared = True
            await trio.sleep(SYNC_S)
            await self.sync()

    async def sync(self) -> None:
        """One exchange with the fleet: rates, the HTTP listener's request rates, calls in flight."""
        limiter = self.limiter
        try:
            if limiter.rates is not None:
                await self._sync_rates(limiter.rates, "rate")
            if limiter.requests is not None:
                await self._sync_rates(limiter.requests, "http")
            if limiter.caps is not None:
                await self._sync_caps(limiter.caps)
        except StoreUnavailableError:
            for buckets in (limiter.rates, limiter.requests):
                if buckets is not None:
                    buckets.take_admitted()  # served alone meanwhile: never billed to the fleet later

    async def _sync_rates(self, buckets: RateBuckets, kind: str) -> None:
        admitted = buckets.take_admitted()
        asked = list(admitted) + [key for key in buckets.busy() if key not in admitted]
        for batch in _batches(asked):
            keys = [f"{self.settings.key_prefix}:{kind}:{_digest(key)}" for key in batch]
            args = [repr(buckets.interval_s), *(admitted.get(key, 0) for key in batch)]
            ahead = await self._run("gcra", GCRA_LUA, keys, args)
            for key, seconds in zip(batch, ahead, strict=True):
                buckets.catch_up(key, float(seconds))

    async def _sync_caps(self, caps: InFlightCaps) -> None:
        """This replica's calls in flight per key (0 for keys it reported and no longer has), and every
        key the other replicas have calls in flight for."""
        counts = caps.counts()
        pairs: list[Any] = []
        for key in set(counts) | self._reported:
            pairs += [key, counts.get(key, 0)]
        args = [self.settings.replica, int(INFLIGHT_TTL_S), *pairs]
        answer = await self._run("inflight", INFLIGHT_LUA, [f"{self.settings.key_prefix}:inflight"], args)
        others: dict[str, int] = {}
        for index in range(0, len(answer) - 1, 2):
            key = (
                answer[index].decode("utf-8", "surrogatepass")
                if isinstance(answer[index], bytes)
                else answer[index]
            )
            others[str(key)] = int(answer[index + 1])
        caps.others = others
        self._reported = set(counts)

    async def _run(self, name: str, source: str, keys: list[str], args: list[Any]) -> Sequence[Any]:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self.store.client().register_script(source)
        return await self.store.command(lambda client: script(keys=keys, args=args))  # type: ignore[no-any-return]


def _batches(keys: list[str]) -> list[list[str]]:
    return [keys[start : start + BATCH_KEYS] for start in range(0, len(keys), BATCH_KEYS)]
