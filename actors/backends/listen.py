"""A modern backend's one subscriptions/listen (MCP 2026-07-28, subscriptions; decision D11).

The 2026 era has no resources/subscribe and no unasked list_changed: a client opens a listen naming what it
wants to hear of, the server acknowledges the part it honours, and the stream carries those notifications
under the listen's id until one side cancels it. The gateway keeps one listen per modern backend: the list
changes its discover capabilities offer, and the resources the gateway's sessions subscribed to on it (the
shared table's `uris_of`). A session's resources/subscribe or unsubscribe for the backend changes that
filter instead of going to it: a new listen is opened, its acknowledgement awaited, and only then is the
old one cancelled, so no notification falls between the two.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink
from actors.protocol.codec import clip
from actors.protocol.envelopes import Call, Reply, ReplySlot, answer, next_call_id
from actors.protocol.eras import SUBSCRIPTION_ID_KEY, request_meta
from actors.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, rpc_error, unavailable
from actors.protocol.messages import Notification, RpcError

LISTEN: Final = "subscriptions/listen"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
LISTEN_FILTER_METHODS: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
CHANGES_SIZE: Final = 64  # subscribe and unsubscribe calls queued while a listen is being replaced
ACK_WAIT_S: Final = 10.0  # a listen not acknowledged by then has failed
END_WAIT_S: Final = 5.0  # a cancelled listen's graceful result awaited this long, then it is forgotten
REOPEN_S: Final = 1.0  # before listening again after the backend ended the listen; doubled each time
REOPEN_MAX_S: Final = 30.0
REOPEN = None  # in the changes inbox: the backend ended the current listen, open another


def listen_filter(capabilities: Mapping[str, Any], uris: set[str]) -> dict[str, Any]:
    """What to listen for: the list changes the backend's capabilities offer, and `uris` when it takes
    resource subscriptions. Empty: nothing to listen for."""
    wanted: dict[str, Any] = {}
    for capability, flag in (("tools", "tools"), ("prompts", "prompts"), ("resources", "resources")):
        if _offers(capabilities, capability, "listChanged"):
            wanted[f"{flag}ListChanged"] = True
    if uris and _offers(capabilities, "resources", "subscribe"):
        wanted["resourceSubscriptions"] = sorted(uris)
    return wanted


def subscription_id(params: object) -> object:
    """A listen notification's subscriptionId (None when it names none)."""
    meta = request_meta(params)
    return meta.get(SUBSCRIPTION_ID_KEY) if meta is not None else None


def _offers(capabilities: Mapping[str, Any], capability: str, flag: str) -> bool:
    offered = capabilities.get(capability)
    return isinstance(offered, dict) and offered.get(flag) is True


@attrs.define(eq=False)
class _Stream:
    """One listen: its call (in the link's in-flight table until it ends), and how far it got."""

    call: Call
    opened_s: float
    settled: trio.Event = attrs.field(factory=trio.Event)  # acknowledged, or ended first
    acked: bool = False
    ended: Reply | None = None


@attrs.define(kw_only=True)
class BackendListen:
    """Owns: the backend's current listen, the URIs in its filter, the listens being opened or ended.
    Receives: the backend's resources/subscribe and unsubscribe Calls (`take`); its acknowledgements
        (`acknowledged`); the end of each listen (its reply).
    Sends: subscriptions/listen and notifications/cancelled to the backend; each Call's one answer: {} once
        the listen with the new filter is acknowledged, else the error that kept it from being.
    Stops when: the run ends (cancelled); Calls still queued are answered that the backend is unavailable.
    Errors: none raised: a listen refused, or not acknowledged within ACK_WAIT_S, is logged and the old one
        kept; one the backend ends is opened again with backoff."""

    link: BackendLink
    capabilities: Mapping[str, Any]
    uris: set[str]
    _changes_send: trio.MemorySendChannel[Call | None] = attrs.field(init=False)
    _changes: trio.MemoryReceiveChannel[Call | None] = attrs.field(init=False)
    _current: _Stream | None = attrs.field(init=False, default=None)  # whose notifications are heard
    _opening: _Stream | None = attrs.field(init=False, default=None)  # current from its acknowledgement on
    _streams: dict[int, _Stream] = attrs.field(init=False, factory=dict)  # by listen id, while they run
    _reopen_s: float = attrs.field(init=False, default=REOPEN_S)

    def __attrs_post_init__(self) -> None:
        self._changes_send, self._changes = trio.open_memory_channel[Call | None](CHANGES_SIZE)

    def take(self, call: Call) -> None:
        """A session's resources/subscribe or unsubscribe: answered once the filter has changed."""
        try:
            self._changes_send.send_nowait(call)
        except trio.WouldBlock:
            message = f"backend '{self.link.name}' has {CHANGES_SIZE} subscription changes queued; try again"
            answer(call, Reply(error=rpc_error(INTERNAL_ERROR, message, backend=self.link.name)))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            answer(call, Reply(error=unavailable(self.link.name, "its run is ending")))

    def acknowledged(self, params: object) -> None:
        listen_id = subscription_id(params)
        stream = self._streams.get(listen_id) if type(listen_id) is int else None
        if stream is not None and stream.ended is None:
            stream.acked = True
            stream.settled.set()
            if stream is self._opening:  # from here on its notifications are heard, the old one's not
                self._current, self._opening = stream, None

    def accepts(self, params: object) -> bool:
        """Whether a list change or resource update is the current listen's (or names no listen): one a
        replaced listen sends while it ends would be heard twice."""
        listen_id = subscription_id(params)
        return listen_id is None or (self._current is not None and listen_id == self._current.call.call_id)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen with the first filter, then follow the changes (queued meanwhile)."""
        async with trio.open_nursery() as nursery:
            with self._changes:
                try:
                    task_status.started()
                    if await self._renew(nursery, listen_filter(self.capabilities, self.uris)) is not None:
                        self._changes_send.send_nowait(REOPEN)
                    await self._follow(nursery)
                finally:
                    self._changes_send.close()
                    self._fail_queued()

    async def _follow(self, nursery: trio.Nursery) -> None:
        async for first in self._changes:
            batch = [first]
            while True:  # what else is queued is one filter change
                try:
                    batch.append(self._changes.receive_nowait())
                except trio.WouldBlock:
                    break
            calls = [call for call in batch if call is not REOPEN]
            if REOPEN in batch:
                await trio.sleep(self._reopen_s)
            uris = self._apply(calls)
            wanted = listen_filter(self.capabilities, uris)
            current = self._current.call.params if self._current is not None else None
            error = None
            if REOPEN in batch or wanted != (current or {}).get("notifications", {}):
                error = await self._renew(nursery, wanted)
            if error is None:
                self.uris = uris
            elif REOPEN in batch:
                self._reopen_s = min(self._reopen_s * 2, REOPEN_MAX_S)
                self._changes_send.send_nowait(REOPEN)  # cannot block: this task is the one reader
            for call in calls:
                if not call.reply_to.filled:
                    answer(call, Reply(error=error) if error is not None else Reply(result={}))

    def _apply(self, calls: list[Call]) -> set[str]:
        """The URIs once these calls are applied; a call that cannot be is answered here."""
        uris = set(self.uris)
        for call in calls:
            uri = call.params.get("uri") if call.params is not None else None
            if not isinstance(uri, str):
                answer(call, Reply(error=rpc_error(INVALID_PARAMS, "Invalid params: uri must be a string")))
            elif call.method == "resources/unsubscribe":
                uris.discard(uri)
            elif not _offers(self.capabilities, "resources", "subscribe"):
                message = f"backend '{self.link.name}' does not offer resource subscriptions"
                answer(call, Reply(error=rpc_error(METHOD_NOT_FOUND, message, backend=self.link.name)))
            else:
                uris.add(uri)
        return uris

    async def _renew(self, nursery: trio.Nursery, wanted: dict[str, Any]) -> RpcError | None:
        """Listen for `wanted` (nothing: no listen), then end the listen it replaces."""
        old, stream = self._current, None
        if wanted:
            stream = await self._open(nursery, wanted)
            if not stream.acked:
                self._opening = None
                return await self._refused(nursery, stream)
            logger.info("listening for {}", ", ".join(_described(wanted)))
        self._current = stream
        if old is not None:
            await self._end(nursery, old, "the gateway listens with a new filter")
        return None

    async def _open(self, nursery: trio.Nursery, wanted: dict[str, Any]) -> _Stream:
        call = Call(next_call_id(), LISTEN, {"notifications": wanted}, "gateway", ReplySlot())
        stream = self._streams[call.call_id] = self._opening = _Stream(call, trio.current_time())
        nursery.start_soon(self._watch, stream)
        await self.link.send_frames([self.link.frame_for(call, timed=False)])
        with trio.move_on_after(ACK_WAIT_S):
            await stream.settled.wait()
        return stream

    async def _refused(self, nursery: trio.Nursery, stream: _Stream) -> RpcError:
        """The error of a listen that was not acknowledged; one still running is cancelled."""
        if stream.ended is None:
            reason = f"not acknowledged within {ACK_WAIT_S}s"
            await self._end(nursery, stream, reason)
        elif stream.ended.error is not None:
            reason = f"refused: {clip(stream.ended.error.message)} (code {stream.ended.error.code})"
        else:
            reason = "ended before it was acknowledged"
        logger.warning("{} {}", LISTEN, reason)
        message = f"backend '{self.link.name}' did not take the subscription: {LISTEN} {reason}"
        return rpc_error(INTERNAL_ERROR, message, backend=self.link.name)

    async def _watch(self, stream: _Stream) -> None:
        """Wait for a listen's end; the current one ending is the backend's doing: listen again."""
        stream.ended = await stream.call.reply_to.wait()
        stream.settled.set()
        self._streams.pop(stream.call.call_id, None)
        if stream is self._current:
            self._current = None
            lived_s = trio.current_time() - stream.opened_s
            if lived_s >= REOPEN_MAX_S:
                self._reopen_s = REOPEN_S
            logger.warning("the backend ended its {} after {:.1f}s; listening again", LISTEN, lived_s)
            # full: a queued change listens again anyway; closed: the run is ending
            with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                self._changes_send.send_nowait(REOPEN)

    async def _end(self, nursery: trio.Nursery, stream: _Stream, reason: str) -> None:
        """Cancel a listen. It stays in the in-flight table a while for its graceful result, so that
        result is not taken for a stray answer; then it is forgotten."""
        cancel = {"requestId": stream.call.call_id, "reason": reason}
        await self.link.send(Notification("notifications/cancelled", cancel))
        nursery.start_soon(self._forget_later, stream)

    async def _forget_later(self, stream: _Stream) -> None:
        with trio.move_on_after(END_WAIT_S):
            await stream.call.reply_to.wait()
        self.link.inflight.pop(stream.call.call_id, None)
        stream.call.reply_to.fill(Reply(result={}))  # its watcher ends; a no-op once it has its result

    def _fail_queued(self) -> None:
        error = unavailable(self.link.name, "its run is ending")
        while True:
            try:
                call = self._changes.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            if call is not REOPEN:
                answer(call, Reply(error=error))


def _described(wanted: dict[str, Any]) -> list[str]:
    parts = [flag for flag, value in wanted.items() if value is True]
    uris = wanted.get("resourceSubscriptions", [])
    return [*parts, f"{len(uris)} resources"] if uris else parts
