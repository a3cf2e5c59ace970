"""The Streamable HTTP sessions of one listener, by `Mcp-Session-Id`, and their lifetimes.

An initialize opens a session under a fresh id (256 random bits); every later request names it in the
Mcp-Session-Id header. A session ends when its gateway session does (a crash included), on DELETE, when an
initialize is answered with an error, or after session_idle_s without a request. An id that ended gets 404
at once, and the client initializes again. Ids are secrets: the log calls a session by its number (http-N).

A modern (2026-07-28) POST gets a session of its own with no id (`open_one_request`), stopped once it is
answered. Both kinds count alike against max_sessions and each client's max_sessions_per_client.

Clients that never DELETE (SDKs that open a session per connection) do not lock themselves out: at the
client's share, its least recently active idle session (no HTTP request open, no GET stream, no request
unanswered or unread) is ended to make room, logged; at the listener's limit, its own least recently
active idle session if it has one, else that of any client. The ended id gets 404 like any other, and
its client initializes again; with [fleet], on every replica when this one opened it (its facts
deleted). Only when every candidate is busy is the new session refused (429, 503, with Retry-After).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.config import HttpSettings
from actors.frontends.admission import Admission
from actors.frontends.auth import Principal, Refused
from actors.frontends.http.fleet_sessions import take_up
from actors.frontends.http.one_request import OneRequestTransport
from actors.frontends.http.resting import Resting
from actors.frontends.http.transport import HttpSessionTransport
from actors.frontends.routing import bound
from actors.policy import caller_of
from actors.protocol.messages import RequestId
from actors.protocol.versions import SUPPORTED_VERSIONS
from actors.routes import RouteState
from actors.runtime.watch import Watch
from actors.session.client_asks import PLAIN_ASK_IDS
from actors.session.session import Session
from actors.session.settings import SessionSettings

if TYPE_CHECKING:  # actors.fleet (and coredis) is imported only with a [fleet] table
    from actors.fleet.relay import FleetRelay
    from actors.fleet.sessions import FleetSessions
    from actors.fleet.states import FleetStates

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"


@attrs.define(eq=False, kw_only=True)
class HttpSession:
    """One HTTP session: the gateway session, the transport the HTTP requests reach it by, and its use."""

    session_id: str = attrs.field(repr=False)  # a secret: never logged
    label: str  # what the log calls it
    transport: HttpSessionTransport
    session: Session
    principal: Principal | None
    client: str  # whom it counts against in max_sessions_per_client
    last_active: float
    busy: int = 0  # HTTP requests being served for it right now (an open GET stream is one)
    told_waiting: int = 0  # [fleet]: notifications its client sent to other replicas, waiting to go in here
    route: RouteState | None = None  # [[routes]]: the route it was opened on (its requests' path's)

    def idle(self) -> bool:
        """Nothing for its client is under way: no HTTP request open, no request unanswered or unread."""
        return self.busy == 0 and self.transport.quiet()


@attrs.define(eq=False, kw_only=True)
class HttpSessions(Mapping[str, HttpSession]):
    """Owns: every HTTP session of one listener, by its id (read as a mapping), and the one-request
    sessions of modern POSTs; each one's count in the listener's admission.
    Receives: `open` (an initialize), `find` (any other request), `enter`/`leave` (each HTTP request for
        a session), `end` (DELETE, a failed initialize), `open_one_request` (a modern POST).
    Sends: nothing; each session runs as a temporary task in the frontends' nursery (`serve_in`).
    Stops when: `expire_idle` is cancelled with the listener's run; the sessions themselves go on.
    Errors: Refused for an id that is missing (400), unknown or ended (404), a protocol version not
        supported (400), and for a session over the limits when no idle one can make room (429, 503); a
        session's crash ends it alone, and its id then gets 404.
    """

    settings: HttpSettings
    catalog: Watch[CatalogView]
    session_settings: SessionSettings
    admission: Admission
    _by_id: dict[str, HttpSession] = attrs.field(factory=dict)
    _one_request: set[Session] = attrs.field(factory=set)  # the sessions of modern POSTs being served
    _resting: Resting[HttpSession] = attrs.field(factory=Resting)  # those with no HTTP request open
    _numbers: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _nursery: trio.Nursery | None = None
    _one_request_settings: SessionSettings = attrs.field(init=False)  # no initialize deadline: none comes
    fleet: FleetSessions | None = None  # with [fleet]: ids name their owner, any replica takes a session up
    taking_up: dict[str, trio.Event] = attrs.field(factory=dict)  # ids being taken up from the fleet now
    relay: FleetRelay | None = None  # with [fleet]: a session's events to the replica of its GET stream
    fleet_states: FleetStates | None = None  # with [fleet]: modern retries claimed, forwarded to their owner

    def __attrs_post_init__(self) -> None:
        self.reconfigure(self.session_settings)

    def reconfigure(self, session_settings: SessionSettings) -> None:
        """What sessions opened from now on are built with (a reload)."""
        self.session_settings = session_settings
        self._one_request_settings = attrs.evolve(session_settings, initialize_within_s=None, quiet=True)

    def __getitem__(self, session_id: str) -> HttpSession:
        return self._by_id[session_id]

    def __iter__(self) -> Iterator[str]:
        """The ids of the sessions open now."""
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def serve_in(self, nursery: trio.Nursery) -> None:
        """Where sessions and the tasks about their streams run: the frontends' nursery."""
        self._nursery = nursery

    @property
    def nursery(self) -> trio.Nursery:
        assert self._nursery is not None, "the listener has not run yet"
        return self._nursery

    def sessions(self) -> list[Session]:
        return [entry.session for entry in self._by_id.values()] + list(self._one_request)

    def stop_all(self) -> None:
        for session in self.sessions():
            session.stop()

    async def wait_all_done(self) -> None:
        for session in self.sessions():
            await session.done.wait()

    def find(self, headers: dict[str, str], principal: Principal | None) -> HttpSession:
        """The session a request names, for the principal its token names. The session's tools were chosen
        by the scopes of the token that opened it: a token that no longer grants one of them gets 404, so
        the client opens a session of its own scopes (a scope taken away never lives on in an old one)."""
        session_id = headers.get(SESSION_HEADER)
        if not session_id:
            raise Refused(400, "the Mcp-Session-Id header is required; send initialize first")
        entry = self._by_id.get(session_id)
        if entry is None or entry.principal != principal or _narrower(principal, entry.principal):
            raise Refused(404, "unknown or expired session; initialize a new one")
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            supported = ", ".join(SUPPORTED_VERSIONS)
            raise Refused(400, f"unsupported MCP-Protocol-Version {version}; supported: {supported}")
        return entry

    async def locate(
        self,
        headers: dict[str, str],
        principal: Principal | None,
        address: str,
        route: RouteState | None = None,
    ) -> HttpSession:
        """`find` at the path of `route`, and with [fleet] a session another replica opened (on `route`)
        taken up here (fleet_sessions.py). A session is served at the path it was opened on: its id at
        another route's path is no session there (404, as an unknown id), so no path reaches tools its
        route does not show."""
        session_id = headers.get(SESSION_HEADER)
        if self.fleet is not None and session_id:
            if session_id not in self._by_id or session_id in self.taking_up:  # waits for the replayed init
                await take_up(self, self.fleet, session_id, principal, address, route)
            await self.fleet.touch(session_id)
        entry = self.find(headers, principal)
        if entry.route is not route:
            raise Refused(404, "no such session at this path; open one here with initialize")
        return entry

    @asynccontextmanager
    async def standalone_stream(
        self, session_id: str, entry: HttpSession, stream: object
    ) -> AsyncIterator[None]:
        """A GET reads `stream` meanwhile: when it is `entry`'s standalone stream and with [fleet], what the
        session's copies on other replicas have for it comes here."""
        if self.relay is None or stream is not entry.transport.standalone:
            yield
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self.relay.listen_stream, session_id, entry.transport.standalone.push)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    async def remember(
        self, session_id: str, principal: Principal | None, params: Any, route: RouteState | None = None
    ) -> None:
        """With [fleet], an initialize's facts (its route's name too) are stored for the other replicas
        before it is answered."""
        if self.fleet is not None and isinstance(params, dict):
            await self.fleet.remember(session_id, principal, params, route.config.name if route else None)

    def ended_elsewhere(self, session_id: str) -> None:
        """[fleet]: the client ended the session on another replica: this copy ends too."""
        entry = self._by_id.get(session_id)
        if entry is not None:
            with logger.contextualize(session=entry.label):
                logger.info("the client ended the session on another replica")
            self.end(session_id, entry)

    async def ended_by_client(self, session_id: str) -> None:
        """DELETE: with [fleet], no replica takes the session up again."""
        if self.fleet is not None:
            await self.fleet.forget(session_id)

    async def refused_initialize(self, session_id: str, entry: HttpSession) -> None:
        """An initialize answered with an error: no session for a client that did not get one started, and
        with [fleet] none of its facts left in Redis (its client never gets the id, nobody takes it up)."""
        self.end(session_id, entry)
        if self.fleet is not None:
            await self.fleet.forget(session_id)

    def open(
        self,
        principal: Principal | None,
        address: str,
        session_id: str | None = None,
        route: RouteState | None = None,
    ) -> tuple[str, HttpSession]:
        """A new session and its id (`session_id`: one the fleet minted, taken up here), running in the
        frontends' nursery; an idle session may be ended to make room for it."""
        client = self.admission.open_session(principal, address, self._open_now(), self._make_room)
        if session_id is None:  # 256 bits from the OS CSPRNG, visible ASCII only; or sealed, naming us
            session_id = self.fleet.mint() if self.fleet is not None else secrets.token_urlsafe(32)
        label = f"http-{next(self._numbers)}"
        transport = HttpSessionTransport(self.settings.max_streams_per_session)
        if self.relay is not None:
            transport.relay = partial(self.relay.publish_stream, session_id)
        catalog, settings = bound(route, self.catalog, self.session_settings)
        session = Session(
            id=label,
            transport=transport,
            catalog=catalog,
            settings=self._settings_for(principal, settings),
            subject=principal.subject if principal else None,
            caller=caller_of(principal, address, "http"),
            # [fleet]: its client's answers find the replica that asked, wherever they land
            ask_ids=self.fleet.ask_ids(session_id) if self.fleet is not None else PLAIN_ASK_IDS,
        )
        entry = HttpSession(
            session_id=session_id,
            label=label,
            transport=transport,
            session=session,
            principal=principal,
            client=client,
            last_active=trio.current_time(),
            route=route,
        )
        self._by_id[session_id] = entry
        self._resting.add(session_id, client, entry)
        self.nursery.start_soon(self._run, session_id, entry)
        return session_id, entry

    def open_one_request(
        self,
        principal: Principal | None,
        address: str,
        frame: bytes,
        request_id: RequestId,
        route: RouteState | None = None,
    ) -> tuple[Session, OneRequestTransport]:
        """A session for one modern request (`frame`), running in the frontends' nursery with no
        initialize deadline; an idle session may be ended to make room; Refused (429, 503) past the
        limits."""
        client = self.admission.open_session(principal, address, self._open_now(), self._make_room)
        transport = OneRequestTransport(frame, request_id)
        catalog, settings = bound(route, self.catalog, self._one_request_settings)
        session = Session(
            id=f"http-{next(self._numbers)}",
            transport=transport,
            catalog=catalog,
            settings=self._settings_for(principal, settings),
            subject=principal.subject if principal else None,
            caller=caller_of(principal, address, "http"),
        )
        self._one_request.add(session)
        self.nursery.start_soon(self._run_one_request, session, client)
        return session, transport

    def enter(self, entry: HttpSession) -> None:
        """An HTTP request for `entry` has begun: it is busy until `leave`."""
        entry.busy += 1
        if entry.busy == 1:
            self._resting.discard(entry.session_id, entry.client)

    def leave(self, entry: HttpSession) -> None:
        """An HTTP request for `entry` has ended (its response written, or its client gone)."""
        entry.busy -= 1
        entry.last_active = trio.current_time()
        if entry.busy == 0 and self._by_id.get(entry.session_id) is entry:
            self._resting.add(entry.session_id, entry.client, entry)

    def end(self, session_id: str, entry: HttpSession) -> None:
        """Forget the id at once (later requests get 404) and free its slot; the session answers what it
        has in flight."""
        self._forget(session_id, entry)
        entry.session.stop()

    async def expire_idle(self) -> None:
        """End each session that has had no request for session_idle_s (an open GET stream is a request)."""
        idle = self.settings.session_idle_s
        while True:
            await trio.sleep(max(0.01, min(idle / 4, 30.0)))
            for session_id, entry in self._idle_since(trio.current_time() - idle):
                with logger.contextualize(session=entry.label):
                    logger.info("no request for {}s; closing the session", idle)
                self.end(session_id, entry)

    def _idle_since(self, moment: float) -> list[tuple[str, HttpSession]]:
        """The sessions with no request since `moment`, oldest first."""
        found = []
        for session_id, entry in self._resting.oldest():
            if entry.last_active > moment:
                break
            found.append((session_id, entry))
        return found

    def _make_room(self, client: str | None, limit: str) -> bool:
        """End the least recently active idle session of `client` (None: of any client), `limit` being
        reached; True when one was ended."""
        found = next(((sid, entry) for sid, entry in self._resting.oldest(client) if entry.idle()), None)
        if found is None:
            return False
        session_id, entry = found
        with logger.contextualize(session=entry.label):
            logger.info(
                "ended to make room for a new session ({}): the least recently active idle one, {:.0f}s idle",
                limit,
                trio.current_time() - entry.last_active,
            )
        self.end(session_id, entry)
        if self.fleet is not None and self.fleet.opened_here(session_id):
            self.nursery.start_soon(self.fleet.forget, session_id)  # else its facts outlive it in Redis
        return True

    async def _run(self, session_id: str, entry: HttpSession) -> None:
        subject = entry.principal.subject if entry.principal else None
        with logger.contextualize(session=entry.label, **({"subject": subject} if subject else {})):
            logger.info("session opened")
            try:
                await entry.session.run_temporary()
            finally:
                self._forget(session_id, entry)

    def _forget(self, session_id: str, entry: HttpSession) -> None:
        """The id leaves the table and the session's slot is freed, once, whichever way it ends."""
        if self._by_id.get(session_id) is not entry:
            return
        del self._by_id[session_id]
        self._resting.discard(session_id, entry.client)
        self.admission.close_session(entry.client)
        if self.fleet is not None:
            self.fleet.dropped(session_id)

    async def _run_one_request(self, session: Session, client: str) -> None:
        try:
            await session.run_temporary()
        finally:
            self.admission.close_session(client)
            self._one_request.discard(session)

    def _settings_for(self, principal: Principal | None, settings: SessionSettings) -> SessionSettings:
        bearer = self.admission.bearer
        return settings if bearer is None else bearer.session_settings(principal, settings)

    def _open_now(self) -> int:
        return len(self._by_id) + len(self._one_request)


def _narrower(principal: Principal | None, opener: Principal | None) -> bool:
    """Whether the request's token lacks a scope of the token its session was opened with."""
    return principal is not None and opener is not None and bool(principal.lacks(opener.scopes))
