"""Legacy HTTP sessions known fleet-wide: each one's client facts in Redis, so that a replica that did not
start a session can take it up (rehydrate it) when its request lands there.

The facts are what the client's initialize carried (capabilities, clientInfo, protocol version) and its
principal (issuer and subject). They are stored under a digest of the session id, never the id itself (a
reader of Redis cannot take over a session), with a TTL refreshed while the session is used. The replica
that opened a session keeps its facts while its copy lives (one entry per session, at most
MAX_FACTS_BYTES: a larger initialize stays a session of this replica alone) and writes them all again
when Redis answers after it did not (written meanwhile, or lost with a Redis that restarted empty).
The facts are deleted when the session ends for good: DELETE, an initialize answered with an error, or
ended to make room by the replica that opened it (and, for what was ended while Redis was out of reach,
once it answers); else their TTL frees them (a replica that crashed, a copy ended for idleness).

Beside the facts, what the client set since (its log level, its resource subscriptions: session_state.py),
noted by whichever replica answered it, read back by a replica that takes the session up.

What the client sends that is no request needs no copy where it lands (fleet_messages.py in the HTTP
front): its answers to the gateway's requests go to the replica that asked (named in the ids it was sent:
ask_ids.py), and its notifications reach each copy of the session through the relay (`told_elsewhere`).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.config.fleet_schema import FleetSettings
from actors.fleet.ask_ids import AskIdSeal, SessionAskIds
from actors.fleet.session_ids import SessionIds
from actors.fleet.session_state import LEVEL, MAX_KEPT_URIS, SUB, SessionState, change_of
from actors.fleet.store import FleetStore, StoreUnavailableError
from actors.identity.principal import Principal

FACTS_VERSION: Final = 1
MAX_FACTS_BYTES: Final = 64 * 1024  # a client's capabilities and clientInfo are a few hundred bytes
REFRESH_SHARE: Final = 4  # the TTL is refreshed once a quarter of it has passed since the last refresh
MAX_ENDS_KEPT: Final = 4096  # sessions deleted while Redis was away, ended fleet-wide once it answers;
# past it the oldest's facts are left to their TTL


def _who(principal: Principal | None) -> list[str | None] | None:
    return None if principal is None else [principal.issuer, principal.subject]


@attrs.define(eq=False, kw_only=True)
class FleetSessions:
    """Owns: the facts of the sessions this replica opened and each known session's last TTL refresh.
    Receives: `mint`, `remember` (an initialize answered), `recall` (an id this replica does not hold),
        `note` (a setLevel, subscribe or unsubscribe answered), `touch` (each request), `forget` (DELETE),
        `dropped` (a local copy ended), `known` (a notification for a session with no copy here),
        `tell_others` (a notification its client sent here), `told_elsewhere` (one it sent elsewhere).
    Sends: commands to the FleetStore.
    Stops when: with the gateway; nothing of its own runs.
    Errors: none raised; Redis being down makes `recall` find nothing and `remember` keep the facts here.
    """

    settings: FleetSettings
    ids: SessionIds
    store: FleetStore
    asks: AskIdSeal  # the ids of the gateway's requests to its legacy HTTP clients
    _owned: dict[str, bytes] = attrs.field(factory=dict)  # the facts of the sessions opened here, alive
    _local: dict[str, str] = attrs.field(factory=dict)  # digest -> id of each session with a copy here
    end_local: Callable[[str], None] | None = None  # ends this replica's copy of a session (the HTTP side)
    announce_end: Callable[[str], None] | None = None  # tells the other replicas (the relay)
    # tells the other replicas' copies of a session (by its digest) a notification its client sent here
    announce_told: Callable[[str, str, object], bool] | None = None
    # gives this replica's copy of a session a notification its client sent to another replica (the HTTP side)
    tell_local: Callable[[str, str, dict[str, Any]], None] | None = None
    _refreshed: dict[str, float] = attrs.field(factory=dict)
    _states: dict[str, SessionState] = attrs.field(factory=dict)  # of sessions with a copy here, once set
    _ended_unsaid: dict[str, None] = attrs.field(factory=dict)  # digests deleted while Redis was away

    def __attrs_post_init__(self) -> None:
        self.store.on_back.append(self.catch_up)

    def mint(self) -> str:
        return self.ids.mint()

    def owner(self, session_id: str) -> str | None:
        return self.ids.owner(session_id)

    @property
    def replica(self) -> str:
        return self.settings.replica

    def ask_ids(self, session_id: str) -> SessionAskIds:
        """The ids the client of `session_id` sees on the requests this replica sends it."""
        return self.asks.for_session(session_id)

    def asker(self, session_id: str, request_id: object) -> str | None:
        """The replica that sent the request a client's answer names (None: no replica of this fleet sent
        `request_id` to this session)."""
        return self.asks.asker(session_id, request_id)

    def opened_here(self, session_id: str) -> bool:
        """Whether this replica minted the id: a session it ends to make room then ends fleet-wide (`forget`),
        as without a fleet, so a client's share here caps its facts in Redis too."""
        return self.ids.owner(session_id) == self.settings.replica

    async def remember(
        self,
        session_id: str,
        principal: Principal | None,
        initialize: dict[str, Any],
        route: str | None = None,
    ) -> None:
        """The facts of a session this replica opened, written before its client hears of it: its
        principal, its initialize and the route ([[routes]]) it was opened on (None: the listener's path)."""
        facts = orjson.dumps(
            {"v": FACTS_VERSION, "who": _who(principal), "initialize": initialize, "route": route}
        )
        if len(facts) > MAX_FACTS_BYTES:
            logger.warning("fleet: an initialize of {} bytes is kept on this replica alone", len(facts))
            return
        self._owned[session_id] = facts
        self._local[digest_of(session_id)] = session_id
        self._refreshed[session_id] = trio.current_time()
        with contextlib.suppress(StoreUnavailableError):
            await self._write(session_id, facts)

    async def recall(
        self, session_id: str, principal: Principal | None, route: str | None = None
    ) -> dict[str, Any] | None:
        """The initialize params of a session the fleet holds, when `principal` is the one it was opened
        for and `route` the route it was opened on; None for an id the fleet did not mint, facts gone or
        unreadable, another principal or route, or Redis down. Found, the session is known here from then
        on: `dropped` when no copy of it opens."""
        initialize = await self._initialize_of(session_id, principal, route)
        if initialize is None:
            return None
        self._refreshed[session_id] = trio.current_time()
        self._local[digest_of(session_id)] = session_id
        try:
            fields = await self.store.command(lambda client: client.hgetall(self._state_key(session_id)))
        except StoreUnavailableError:
            fields = None  # taken up without what its client set since: better than not at all
        state = SessionState.of_fields(fields)
        if state.level is not None or state.uris:
            self._states[session_id] = state
        return initialize

    async def known(self, session_id: str, principal: Principal | None, route: str | None = None) -> bool:
        """Whether the fleet holds the session for `principal` on `route` (its facts read, no copy made)."""
        return await self._initialize_of(session_id, principal, route) is not None

    async def _initialize_of(
        self, session_id: str, principal: Principal | None, route: str | None
    ) -> dict[str, Any] | None:
        if self.ids.owner(session_id) is None:
            return None
        try:
            raw = await self.store.command(lambda client: client.get(self._key(session_id)))
        except StoreUnavailableError:
            return None
        try:
            facts = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            facts = None
        if not isinstance(facts, dict) or facts.get("v") != FACTS_VERSION:
            return None
        initialize = facts.get("initialize")
        if facts.get("who") != _who(principal) or not isinstance(initialize, dict):
            return None
        if facts.get("route") != route:  # its id at another route's path is no session there
            return None
        return initialize

    def state_of(self, session_id: str) -> SessionState:
        """What the client of a session with a copy here set since its initialize, as far as known here."""
        return self._states.get(session_id) or SessionState()

    async def note(self, session_id: str, method: str, params: object) -> None:
        """A logging/setLevel, resources/subscribe or unsubscribe the session answered with a result: kept
        for a replica that takes the session up. Nothing for a session the fleet does not hold."""
        change = change_of(method, params)
        if change is None or self._local.get(digest_of(session_id)) != session_id:
            return
        kind, value = change
        state = self._states.setdefault(session_id, SessionState())
        field = LEVEL if kind == "level" else SUB + value.encode()
        if kind == "level":
            state.level = value
        elif kind == "subscribe" and (value in state.uris or len(state.uris) < MAX_KEPT_URIS):
            state.uris.add(value)
        elif kind == "unsubscribe":
            state.uris.discard(value)
        else:
            return
        key, ttl_s = self._state_key(session_id), int(self.settings.session_ttl_s)
        with contextlib.suppress(StoreUnavailableError):
            if kind == "unsubscribe":
                await self.store.command(lambda client: client.hdel(key, [field]))
            else:
                stored = value.encode() if kind == "level" else b"1"
                await self.store.command(lambda client: client.hset(key, {field: stored}))
            await self.store.command(lambda client: client.expire(key, ttl_s))

    async def touch(self, session_id: str) -> None:
        """A request for the session: the TTL of its facts and state refreshed, once a quarter of the TTL."""
        now, ttl_s = trio.current_time(), self.settings.session_ttl_s
        if now - self._refreshed.get(session_id, now) < ttl_s / REFRESH_SHARE:
            return
        self._refreshed[session_id] = now
        with contextlib.suppress(StoreUnavailableError):
            await self.store.command(lambda client: client.expire(self._key(session_id), int(ttl_s)))
            # the level and subscriptions too, though another replica noted them (none: a no-op)
            state_key = self._state_key(session_id)
            await self.store.command(lambda client: client.expire(state_key, int(ttl_s)))

    async def forget(self, session_id: str) -> None:
        """The client ended the session (DELETE): no replica takes it up again, and every replica's copy
        ends."""
        self.dropped(session_id)
        digest = digest_of(session_id)
        try:
            await self._end(digest)
        except StoreUnavailableError:  # its facts may be there still: ended once Redis answers again
            self._ended_unsaid[digest] = None
            if len(self._ended_unsaid) > MAX_ENDS_KEPT:
                del self._ended_unsaid[next(iter(self._ended_unsaid))]
            logger.warning("fleet: a deleted session is ended fleet-wide once Redis answers again")

    async def _end(self, digest: str) -> None:
        """The other replicas end their copies; the facts and state are deleted (StoreUnavailableError)."""
        if self.announce_end is not None:
            self.announce_end(digest)
        prefix = self.settings.key_prefix
        keys = [f"{prefix}:session:{digest}", f"{prefix}:session-state:{digest}"]
        await self.store.command(lambda client: client.delete(keys))

    def dropped(self, session_id: str) -> None:
        """This replica's copy of the session ended: nothing of it is kept here."""
        self._owned.pop(session_id, None)
        self._refreshed.pop(session_id, None)
        self._local.pop(digest_of(session_id), None)
        self._states.pop(session_id, None)

    def tell_others(self, session_id: str, method: str, params: object) -> bool:
        """A notification the session's client sent here, for its copies on other replicas (relay.TOLD says
        which are passed on, and what of them); False when it was not sent."""
        if self.announce_told is None:
            return False
        return self.announce_told(digest_of(session_id), method, params)

    def told_elsewhere(self, digest: str, method: str, params: dict[str, Any]) -> None:
        """A notification the session's client sent to another replica: this replica's copy hears it too."""
        session_id = self._local.get(digest)
        if session_id is not None and self.tell_local is not None:
            self.tell_local(session_id, method, params)

    def ended_elsewhere(self, digest: str) -> None:
        """Another replica's client ended this session: this replica's copy ends too (later requests 404)."""
        session_id = self._local.get(digest)
        if session_id is not None and self.end_local is not None:
            self.end_local(session_id)

    async def catch_up(self) -> None:
        """Redis is back: the sessions deleted meanwhile are ended fleet-wide (their facts, if Redis kept
        them, deleted), and the facts of every session opened here and alive are written again."""
        for digest in list(self._ended_unsaid):
            try:
                await self._end(digest)
            except StoreUnavailableError:
                return
            self._ended_unsaid.pop(digest, None)
        written = 0
        for session_id, facts in list(self._owned.items()):
            if session_id not in self._owned:  # ended meanwhile
                continue
            try:
                await self._write(session_id, facts)
            except StoreUnavailableError:
                return
            written += 1
        for session_id, state in list(self._states.items()):
            try:
                await self._write_state(session_id, state)
            except StoreUnavailableError:
                return
        logger.info("fleet: the facts of {} sessions written again", written)

    async def _write(self, session_id: str, facts: bytes) -> None:
        ttl_s = int(self.settings.session_ttl_s)
        await self.store.command(lambda client: client.set(self._key(session_id), facts, ex=ttl_s))

    async def _write_state(self, session_id: str, state: SessionState) -> None:
        fields, key = state.fields(), self._state_key(session_id)
        if fields:
            await self.store.command(lambda client: client.hset(key, fields))
            await self.store.command(lambda client: client.expire(key, int(self.settings.session_ttl_s)))

    def _key(self, session_id: str) -> str:
        return f"{self.settings.key_prefix}:session:{digest_of(session_id)}"

    def _state_key(self, session_id: str) -> str:
        return f"{self.settings.key_prefix}:session-state:{digest_of(session_id)}"


def digest_of(session_id: str) -> str:
    """What names a session outside this process (Redis keys, notices): never the id, a secret."""
    return hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()[:40]
