"""The trust store in Redis ([fleet]): one baseline per definition for the whole fleet, so a change one
replica sees is held on every replica, and an approval on one serves all (trust/store.py's interface).

Keys (under `key_prefix`), per backend: `:trust:base:<backend>` (a hash: [kind, name] as JSON -> its
Baseline), `:trust:text:<backend>` (-> the text a reviewer read), `:trust:held:<backend>` (-> its Held
record); and `:trust:events`, the newest MAX_EVENTS events (LPUSH and LTRIM). A first-sight pin is HSETNX in a
script with the rest of its batch: the first replica to pin a name wins, and what another found instead is
handed back (the ledger then holds its own form). A decision is a script too: refused when the stored held
record has another digest than the one reviewed. After each write the replica tells the others (the relay's
`trust` notice) and they load that backend again.

Redis is the only copy: run it with persistence (AOF or RDB), or a Redis restarted empty forgets what was
approved (the replicas running keep it in memory until they restart).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs
import orjson

from actors.config.fleet_schema import FleetSettings
from actors.fleet.store import FleetStore, StoreUnavailableError
from actors.trust.definitions import KINDS, DefinitionKey
from actors.trust.ledger import FIRST_SIGHT, Writes
from actors.trust.records import Baseline, Held, TrustEvent, key_of
from actors.trust.store import (
    MAX_EVENTS,
    BackendTrust,
    Decision,
    DecisionRefusedError,
    TrustStoreUnavailableError,
)

# KEYS: base, text, held, events. ARGV: pins (field, baseline, text, first), holds (field, record), events,
# each list after its count, then the events kept. Returns [field, stored] for each first pin not taken.
WRITE_LUA: Final = """
local lost, i = {}, 1
local pins = tonumber(ARGV[i]); i = i + 1
for _ = 1, pins do
  local field, baseline, text, first = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  if first == "1" and redis.call("HSETNX", KEYS[1], field, baseline) == 0 then
    table.insert(lost, field)
    table.insert(lost, redis.call("HGET", KEYS[1], field))
  else
    redis.call("HSET", KEYS[1], field, baseline)
    redis.call("HSET", KEYS[2], field, text)
  end
end
local holds = tonumber(ARGV[i]); i = i + 1
for _ = 1, holds do
  redis.call("HSET", KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local events = tonumber(ARGV[i]); i = i + 1
for _ = 1, events do
  redis.call("LPUSH", KEYS[4], ARGV[i])
  i = i + 1
end
if events > 0 then redis.call("LTRIM", KEYS[4], 0, tonumber(ARGV[i]) - 1) end
return lost
"""
# KEYS: base, text, held, events. ARGV: field, digest, approve, baseline, text, rejected record, event, kept.
# Returns "" when applied, else the digest held now.
DECIDE_LUA: Final = """
local stored = redis.call("HGET", KEYS[3], ARGV[1])
if stored then
  local digest = cjson.decode(stored)["digest"]
  if digest ~= ARGV[2] then return digest end
end
if ARGV[3] == "1" then
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[4])
  redis.call("HSET", KEYS[2], ARGV[1], ARGV[5])
  redis.call("HDEL", KEYS[3], ARGV[1])
else
  redis.call("HSET", KEYS[3], ARGV[1], ARGV[6])
end
redis.call("LPUSH", KEYS[4], ARGV[7])
redis.call("LTRIM", KEYS[4], 0, tonumber(ARGV[8]) - 1)
return ""
"""


@attrs.define(eq=False)
class RedisTrustStore:
    settings: FleetSettings
    store: FleetStore
    _scripts: dict[str, Any] = attrs.field(factory=dict)

    @property
    def shown(self) -> str:
        return f"Redis ({self.settings.key_prefix}:trust:*)"

    def _keys(self, backend: str) -> list[str]:
        prefix = f"{self.settings.key_prefix}:trust"
        return [
            f"{prefix}:base:{backend}",
            f"{prefix}:text:{backend}",
            f"{prefix}:held:{backend}",
            self._events,
        ]

    @property
    def _events(self) -> str:
        return f"{self.settings.key_prefix}:trust:events"

    async def open(self) -> None:
        """Nothing to open: the fleet's link is the store's."""

    async def _command(self, run: Any) -> Any:
        try:
            return await self.store.command(run)
        except StoreUnavailableError as exc:
            raise TrustStoreUnavailableError(f"Redis: {exc}") from None

    async def _script(self, name: str, source: str, keys: list[str], args: list[Any]) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self.store.client().register_script(source)
        return await self._command(lambda client: script(keys=keys, args=args))

    async def load(self, backends: Sequence[str]) -> dict[str, BackendTrust]:
        loaded = {}
        for backend in backends:
            base, _, held, _ = self._keys(backend)
            raw_bases = await self._command(lambda client, key=base: client.hgetall(key))
            raw_held = await self._command(lambda client, key=held: client.hgetall(key))
            baselines = {
                slot: baseline
                for field, value in raw_bases.items()
                if (slot := _slot(field)) is not None and (baseline := Baseline.of(_json(value))) is not None
            }
            records = {
                slot: record
                for field, value in raw_held.items()
                if (slot := _slot(field)) is not None
                and (record := Held.of(_json(value))) is not None
                and (record.key.kind, record.key.name) == slot
                and record.key.backend == backend
            }
            loaded[backend] = BackendTrust(baselines, records)
        return loaded

    async def write(self, writes: Writes) -> dict[str, BackendTrust]:
        backends = sorted(
            {key.backend for key in (*writes.pins, *writes.holds, *(e.key for e in writes.events))}
        )
        lost: dict[str, BackendTrust] = {}
        for backend in backends:
            pins = [(key, pin) for key, pin in writes.pins.items() if key.backend == backend]
            holds = [(key, held) for key, held in writes.holds.items() if key.backend == backend]
            events = [event for event in writes.events if event.key.backend == backend]
            args: list[Any] = [len(pins)]
            for key, (baseline, text) in pins:
                args += [
                    _field(key),
                    _dumps(baseline.as_json()),
                    text,
                    "1" if baseline.by == FIRST_SIGHT else "0",
                ]
            args.append(len(holds))
            for key, held in holds:
                args += [_field(key), _dumps(held.as_json())]
            args += [len(events), *(_dumps(event.as_json()) for event in events), MAX_EVENTS]
            answer = await self._script("write", WRITE_LUA, self._keys(backend), args)
            ours = {_field(key): baseline.digest for key, (baseline, _) in pins}
            found = {}
            for index in range(0, len(answer) - 1, 2):
                slot, baseline = _slot(answer[index]), Baseline.of(_json(answer[index + 1]))
                if (
                    slot is not None
                    and baseline is not None
                    and baseline.digest != ours.get(_text(answer[index]))
                ):
                    found[slot] = baseline
            if found:
                lost[backend] = BackendTrust(baselines=found)
        return lost

    async def decide(self, decision: Decision) -> None:
        key = decision.key
        rejected = attrs.evolve(decision.held, rejected_by=decision.by)
        args = [
            _field(key),
            decision.digest,
            "1" if decision.approve else "0",
            _dumps(decision.baseline().as_json()),
            decision.held.text,
            _dumps(rejected.as_json()),
            _dumps(decision.event().as_json()),
            MAX_EVENTS,
        ]
        answer = _text(await self._script("decide", DECIDE_LUA, self._keys(key.backend), args))
        if answer:
            raise DecisionRefusedError(f"it changed since: held now as {answer}")

    async def text_of(self, key: DefinitionKey) -> str | None:
        _, text, _, _ = self._keys(key.backend)
        value = await self._command(lambda client: client.hget(text, _field(key)))
        return _text(value) if value is not None else None

    async def events(self, limit: int) -> list[TrustEvent]:
        values = await self._command(lambda client: client.lrange(self._events, 0, limit - 1))
        return [event for value in values if (event := _event(_json(value))) is not None]

    async def close(self) -> None:
        """The link is the fleet's: closed with it."""


def _field(key: DefinitionKey) -> str:
    return _dumps([key.kind, key.name])


def _slot(field: object) -> tuple[Any, str] | None:
    value = _json(field)
    if isinstance(value, list) and len(value) == 2 and value[0] in KINDS and isinstance(value[1], str):
        return value[0], value[1]
    return None


def _event(raw: object) -> TrustEvent | None:
    key = key_of(raw)
    if key is None or not isinstance(raw, dict):
        return None
    at, event, by = raw.get("at"), raw.get("event"), raw.get("by")
    old, new, detail = raw.get("old"), raw.get("new"), raw.get("detail", "")
    if not isinstance(at, int | float) or not isinstance(event, str) or not isinstance(by, str):
        return None
    old = old if isinstance(old, str) else None
    new = new if isinstance(new, str) else None
    return TrustEvent(float(at), key, event, by, old, new, str(detail))


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _json(value: object) -> object:
    try:
        return orjson.loads(value) if isinstance(value, str | bytes) else None
    except orjson.JSONDecodeError:
        return None
