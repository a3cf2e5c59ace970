"""Messages between replicas over Redis pub/sub: a backend's resource updates to every replica, and what a
session's copy on one replica has for the client's GET stream open on another.

Channels (under `key_prefix`):
  `:notices`          every replica's resources/updated, as {"from", "backend", "uri"}; each other replica
                      hands it to its own sessions and listens (the gateway's events broadcast), so a
                      subscriber hears of a change whichever replica's backend saw it. And {"from", "ended"}:
                      a session its client ended (DELETE), which every replica's copy of it ends too. And
                      {"from", "backend", "changed"}: a backend's own server announced a list change (the
                      list_changed method), which every other replica's actor of it lists again (and never
                      announces again); one per backend and method waits in the outbox at most. And
                      {"from", "told", "method", "params"}: a notification a legacy session's client sent
                      to this replica (initialized, cancelled, roots/list_changed) for the copies of the
                      session (named by its digest) on the others: where a request it cancels runs, the
                      owner that waits for initialized, every copy whose backends hear of roots.
  `:stream:<digest>`  a legacy session's standalone events (list_changed, resources/updated, a backend's
                      request when no call's stream is read): subscribed while the session's GET stream is
                      open on this replica; a copy with no GET reader of its own publishes there, and keeps
                      the event for a later GET here only when no replica took it.

Publishing never blocks a session: an outbox of OUTBOX_SIZE, a full one (or Redis down) keeps the event
where it was made. The subscriber is one connection, resubscribed by coredis after Redis comes back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.backends.listing import CHANGES
from actors.config.fleet_schema import FleetSettings
from actors.fleet.store import CHECK_DOWN_S, FleetStore, StoreUnavailableError, link_errors
from actors.protocol.envelopes import BackendEvent
from actors.protocol.messages import Notification, is_id
from actors.runtime.broadcast import Broadcast

OUTBOX_SIZE: Final = 1024  # events waiting to be published; past it, each stays where it was made
EVENTS_SIZE: Final = 256  # this replica's backend events read for fan-out
UPDATED: Final = "notifications/resources/updated"
MAX_URI_CHARS: Final = 4096
MAX_NAME_CHARS: Final = 256  # of a backend's name in a notice: longer is nothing a replica runs
# a client's notifications a copy of its session on another replica may need; nothing else of theirs is told
TOLD: Final = frozenset(
    {"notifications/initialized", "notifications/cancelled", "notifications/roots/list_changed"}
)
MAX_TOLD_ID_CHARS: Final = 1024  # codec.MAX_ID_CHARS: a longer id is no request's in flight
MAX_TOLD_REASON_CHARS: Final = 1024  # of a cancel's reason told (the session passes on its first 256)
DIGEST_CHARS: Final = 40  # of a session's digest (fleet/sessions.digest_of)

Deliver = Callable[[bytes], None]


@attrs.frozen(slots=True)
class RelayedEvent(BackendEvent):
    """A backend event another replica saw, handed to this replica's sessions (and never sent out again)."""


@attrs.frozen
class Outgoing:
    channel: str
    payload: bytes
    unheard: Deliver | None = None  # called with the payload when no replica subscribed to the channel
    change: tuple[str, str] | None = None  # a list change's (backend, method): waiting until published


@attrs.define(eq=False, kw_only=True)
class FleetRelay:
    """Owns: the pub/sub connection, the local receivers of each subscribed channel, the outbox.
    Receives: `publish_stream` (a copy's event), `listen_stream` (a GET stream open here), Redis messages.
    Sends: Redis PUBLISH; received stream events to their GET stream, received notices to the events
        broadcast (marked, so they are not sent out again).
    Stops when: cancelled with the gateway's root.
    Errors: none escape; Redis down keeps events local.
    """

    settings: FleetSettings
    store: FleetStore
    events: Broadcast[BackendEvent]
    on_ended: Callable[[str], None] | None = None  # a session's digest, ended by its client elsewhere
    on_told: Callable[[str, str, dict[str, Any]], None] | None = None  # (digest, method, params): told
    # by a session's client to another replica
    on_list_changed: Callable[[str, str], object] | None = None  # (backend, method) announced elsewhere
    on_rejoined: Callable[[], object] | None = None  # Redis answers again: this replica's lists are checked
    _changes: set[tuple[str, str]] = attrs.field(factory=set)  # list changes in the outbox: coalesced
    # list changes of backends here not published (Redis away): published when it answers again; one per
    # backend and method, so bounded by the config
    _missed: set[tuple[str, str]] = attrs.field(factory=set)
    _receivers: dict[str, list[Deliver]] = attrs.field(factory=dict)  # channel -> the GET streams here
    _pubsub: Any = None
    _outbox_send: trio.MemorySendChannel[Outgoing] = attrs.field(init=False)
    _outbox: trio.MemoryReceiveChannel[Outgoing] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._outbox_send, self._outbox = trio.open_memory_channel[Outgoing](OUTBOX_SIZE)

    @property
    def notices(self) -> str:
        return f"{self.settings.key_prefix}:notices"

    def stream_channel(self, session_id: str) -> str:
        digest = hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()[:40]
        return f"{self.settings.key_prefix}:stream:{digest}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        mine, events = trio.open_memory_channel[BackendEvent](EVENTS_SIZE)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._publisher)
            nursery.start_soon(self._share_updates, events)
            with self.events.deliver_to(mine):
                task_status.started()
                await self._subscriber()

    def publish_ended(self, digest: str) -> None:
        """A session ended by its client (DELETE): every replica ends its copy (named by the digest of its
        id: ids are secrets, and what crosses Redis is readable there)."""
        payload = {"from": self.settings.replica, "ended": digest}
        self._send(Outgoing(self.notices, orjson.dumps(payload)))

    def publish_told(self, digest: str, method: str, params: object) -> bool:
        """A client's notification (one of TOLD) for the copies of its session (`digest`) on the other
        replicas; only what they act on is sent: a cancel's requestId and reason. False when it cannot be
        sent (Redis away, the outbox full, a requestId no request in flight has)."""
        told = told_params(method, params)
        if told is None:
            return False
        payload = {"from": self.settings.replica, "told": digest, "method": method, "params": told}
        if self._send(Outgoing(self.notices, orjson.dumps(payload))):
            return True
        logger.info("fleet: a client's {} is not told to the other replicas (Redis away, or busy)", method)
        return False

    def publish_list_changed(self, backend: str, method: str) -> None:
        """This replica's `backend` announced a list change: the other replicas list it again. One per
        backend and method waits in the outbox; announcements meanwhile are that one."""
        change = (backend, method)
        if change in self._changes:
            return
        payload = {"from": self.settings.replica, "backend": backend, "changed": method}
        if self._send(Outgoing(self.notices, orjson.dumps(payload), change=change)):
            self._changes.add(change)
        else:
            self._missed.add(change)

    async def catch_up(self) -> None:
        """Redis answers again (FleetStore.on_back): news may have been lost both ways while it was away.
        The other replicas' changes: every backend here checks its lists (news to clients only where one
        differs). This replica's: published now, for replicas whose pub/sub stayed up."""
        if self.on_rejoined is not None:
            self.on_rejoined()
        missed, self._missed = self._missed, set()
        for backend, method in sorted(missed):
            logger.bind(backend=backend).info("fleet: telling the other replicas of a missed {}", method)
            self.publish_list_changed(backend, method)

    def publish_stream(self, session_id: str, frame: bytes, unheard: Deliver) -> None:
        """A copy's standalone event, for the GET stream open on another replica (`unheard` if none)."""
        self._send(Outgoing(self.stream_channel(session_id), frame, unheard))

    async def listen_stream(
        self,
        session_id: str,
        deliver: Deliver,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Until cancelled: events other replicas publish for this session go to `deliver` (started once
        subscribed, or once it failed to: the GET stream goes on with this replica's own events)."""
        channel = self.stream_channel(session_id)
        receivers = self._receivers.setdefault(channel, [])
        receivers.append(deliver)
        try:
            if len(receivers) == 1:
                await self._subscribe(channel)
            task_status.started()
            await trio.sleep_forever()
        finally:
            receivers.remove(deliver)
            if not receivers and self._receivers.get(channel) is receivers:
                del self._receivers[channel]
                with trio.CancelScope(shield=True), trio.move_on_after(self.settings.redis_timeout_s):
                    await self._unsubscribe(channel)

    def _send(self, outgoing: Outgoing) -> bool:
        """True when queued for publishing."""
        if not self.store.available:
            self._unheard(outgoing)
            return False
        try:
            self._outbox_send.send_nowait(outgoing)
        except trio.WouldBlock:
            self._unheard(outgoing)
            return False
        return True

    @staticmethod
    def _unheard(outgoing: Outgoing) -> None:
        if outgoing.unheard is not None:
            outgoing.unheard(outgoing.payload)

    async def _publisher(self) -> None:
        async for outgoing in self._outbox:
            if outgoing.change is not None:  # announced again from here on: published again
                self._changes.discard(outgoing.change)
            try:
                heard = await self.store.command(
                    lambda client, o=outgoing: client.publish(o.channel, o.payload)  # type: ignore[misc]
                )
            except StoreUnavailableError:
                heard = 0
                if outgoing.change is not None:
                    self._missed.add(outgoing.change)
            if not heard:
                self._unheard(outgoing)

    async def _share_updates(self, events: trio.MemoryReceiveChannel[BackendEvent]) -> None:
        """This replica's backends' resource updates, to the other replicas."""
        async for event in events:
            if isinstance(event, RelayedEvent):
                continue
            note = event.notification
            uri = note.params.get("uri") if note.method == UPDATED and isinstance(note.params, dict) else None
            if isinstance(uri, str):
                payload = {"from": self.settings.replica, "backend": event.backend, "uri": uri}
                self._send(Outgoing(self.notices, orjson.dumps(payload)))

    async def _subscriber(self) -> None:
        """The one pub/sub connection; coredis reconnects and resubscribes after Redis comes back, and a
        failure it gives up on is logged and the connection opened again."""
        while True:
            try:
                await self._subscribed()
            except* link_errors() as group:  # coredis' own cleanup of a dead link raises anyio's errors too
                closed = all(type(exc).__name__ == "ClosedResourceError" for exc in group.exceptions)
                level = "DEBUG" if closed else "WARNING"  # closed: its link ended (Redis gone, or our stop)
                logger.log(
                    level, "fleet: the pub/sub connection ended ({!r}); opening it again", group.exceptions
                )
            finally:
                self._pubsub = None
            await self.store.wait_available()
            await trio.sleep(CHECK_DOWN_S)

    async def _subscribed(self) -> None:
        async with self.store.client().pubsub(ignore_subscribe_messages=True) as pubsub:
            self._pubsub = pubsub
            await pubsub.subscribe(self.notices, *self._receivers)
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True)
                if message is None or message.get("type") != "message":
                    continue
                channel, data = message.get("channel"), message.get("data")
                if isinstance(channel, bytes):
                    channel = channel.decode("ascii", "replace")
                if not isinstance(data, bytes):
                    continue
                if channel == self.notices:
                    self._notice(data)
                else:
                    for deliver in self._receivers.get(channel, ()):
                        deliver(data)

    def _notice(self, data: bytes) -> None:
        try:
            notice = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(notice, dict) or notice.get("from") == self.settings.replica:
            return
        ended = notice.get("ended")
        if isinstance(ended, str) and self.on_ended is not None:
            self.on_ended(ended)
            return
        if "told" in notice:
            self._told(notice)
            return
        backend, uri, changed = notice.get("backend"), notice.get("uri"), notice.get("changed")
        if isinstance(backend, str) and isinstance(changed, str) and changed in CHANGES:
            if self.on_list_changed is not None and len(backend) <= MAX_NAME_CHARS:
                self.on_list_changed(backend, changed)
            return
        if not isinstance(backend, str) or not isinstance(uri, str) or len(uri) > MAX_URI_CHARS:
            logger.warning(
                "fleet: dropped a malformed notice from replica {!r}", str(notice.get("from"))[:32]
            )
            return
        self.events.publish(RelayedEvent(backend, Notification(UPDATED, {"uri": uri})))

    def _told(self, notice: dict[str, Any]) -> None:
        """A client's notification another replica was sent, checked as if the client sent it here."""
        digest, method = notice.get("told"), notice.get("method")
        told = told_params(method, notice.get("params"))
        if not isinstance(digest, str) or len(digest) != DIGEST_CHARS or told is None:
            sender = str(notice.get("from"))[:32]
            logger.warning("fleet: dropped a malformed notice from replica {!r}", sender)
            return
        if self.on_told is not None:
            assert isinstance(method, str)
            self.on_told(digest, method, told)

    async def _subscribe(self, channel: str) -> None:
        if self._pubsub is not None:
            try:
                with trio.fail_after(self.settings.redis_timeout_s):
                    await self._pubsub.subscribe(channel)
            except (*link_errors(), trio.TooSlowError) as exc:
                logger.warning("fleet: could not subscribe a GET stream's channel: {}", exc)

    async def _unsubscribe(self, channel: str) -> None:
        if self._pubsub is not None:
            try:
                await self._pubsub.unsubscribe(channel)
            except link_errors() as exc:
                logger.debug("fleet: could not unsubscribe: {}", exc)


def told_params(method: object, params: object) -> dict[str, Any] | None:
    """What of a client's notification the other replicas' copies are told: nothing but a cancel's requestId
    and its reason; None when `method` is not one of TOLD or a cancel is one the session drops (no id a
    request in flight can have, a reason that is no string)."""
    if not isinstance(method, str) or method not in TOLD:  # a list is no method (and no key of a set)
        return None
    if method != "notifications/cancelled":
        return {}
    request_id = params.get("requestId") if isinstance(params, dict) else None
    if not is_id(request_id) or (isinstance(request_id, str) and len(request_id) > MAX_TOLD_ID_CHARS):
        return None
    if isinstance(request_id, int) and not -(1 << 63) <= request_id < 1 << 64:
        return None  # no decoded id is this large (and orjson writes none)
    reason = params.get("reason") if isinstance(params, dict) else None
    if reason is None:
        return {"requestId": request_id}
    if not isinstance(reason, str):
        return None
    return {"requestId": request_id, "reason": reason[:MAX_TOLD_REASON_CHARS]}
