"""What one run of a modern backend (MCP 2026-07-28) does beyond forwarding calls: its listen, the commands
and notifications that are the listen's business, and the errors the era gives a meaning to: -32022 (the
backend no longer takes the version: probe again, decision D9) and, over HTTP, -32020 (a header did not
match the body: list the tools again for their header declarations, and send the call once more)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink, request_frame
from actors.backends.era import BackendEraError
from actors.backends.listen import ACKNOWLEDGED, LISTEN_FILTER_METHODS, BackendListen
from actors.backends.listing import CHANGES
from actors.backends.probe import EraState
from actors.config import BackendEra
from actors.protocol.codec import clip
from actors.protocol.envelopes import BackendCommand, Call, Notify, Reply, answer
from actors.protocol.errors import HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION, unavailable
from actors.protocol.messages import Notification, RpcError

RETRIED_MAX: Final = 4096  # ids of calls sent again after -32020 kept, so that none is sent a third time
LISTEN_NOTIFICATIONS: Final = frozenset({*CHANGES, "notifications/resources/updated"})


def refused_version(era: EraState, link: BackendLink, call: Call, error: RpcError) -> bool:
    """A -32022 to a call under era "auto": the call gets an error, and the run ends so that the next
    start probes the backend's era again (D9). True when it was one."""
    if error.code != UNSUPPORTED_PROTOCOL_VERSION or era.era is not BackendEra.AUTO:
        return False
    era.forget(f"it answered {call.method} with -32022")
    reason = (
        f"it refused the protocol version of {call.method} ({clip(error.message)}); its era is probed again"
    )
    answer(call, Reply(error=unavailable(link.name, reason)))
    link.lose(BackendEraError(f"answered {call.method} with -32022: its era is probed again at its restart"))
    return True


@attrs.define(kw_only=True)
class ModernRun:
    """Owns: this run's BackendListen (in the run's nursery), the ids of calls sent again after -32020.
    Receives: from the backend actor, the commands (`takes`) and notifications (`hears`) that may be the
        listen's; from the link, error answers (`on_error`).
    Sends: subscription changes to the listen; a call sent again to the backend.
    Stops when: the run ends (its nursery is cancelled).
    Errors: BackendEraError through the link when the backend refuses the version (ends the run)."""

    link: BackendLink
    nursery: trio.Nursery
    era: EraState  # under era "auto", a -32022 means probing again
    over_http: bool
    relist_tools: Callable[[], Awaitable[None]]  # lists the tools again and tells the catalog
    listen: BackendListen | None = None
    _retried: set[int] = attrs.field(factory=set)

    async def start(self, capabilities: Mapping[str, Any], uris: list[str]) -> None:
        """Take the link's errors, and listen."""
        self.link.on_error = self.on_error
        self.listen = BackendListen(link=self.link, capabilities=capabilities, uris=set(uris))
        await self.nursery.start(self.listen.run)

    def takes(self, command: BackendCommand) -> bool:
        """True when a command is not for the backend as it is: resources/subscribe and unsubscribe change
        the listen instead; a client's roots/list_changed has no place in 2026-07-28 and is dropped."""
        if isinstance(command, Notify):
            return True
        if isinstance(command, Call) and command.method in LISTEN_FILTER_METHODS:
            assert self.listen is not None
            self.listen.take(command)
            return True
        return False

    def hears(self, notification: Notification) -> bool:
        """True when a notification was the listen's business and is done with: an acknowledgement, or a
        change sent by a listen that has been replaced (the current one says it too)."""
        assert self.listen is not None
        if notification.method == ACKNOWLEDGED:
            self.listen.acknowledged(notification.params)
            return True
        return notification.method in LISTEN_NOTIFICATIONS and not self.listen.accepts(notification.params)

    def on_error(self, call: Call, error: RpcError) -> bool:
        if refused_version(self.era, self.link, call, error):
            return True
        if error.code != HEADER_MISMATCH or not self.over_http or call.call_id in self._retried:
            return False
        if len(self._retried) >= RETRIED_MAX:
            self._retried.clear()
        self._retried.add(call.call_id)
        if call.span is not None:  # the hop goes on: its span says why it took two tries
            call.span.event(
                "mcp.gateway.sent_again", {"error.type": str(error.code), "reason": error.message}
            )
        self.link.track(call)  # in flight again: answered by the sweep or the run's end if need be
        message = clip(error.message)
        logger.info(
            "{} got -32020 ({}): listing the tools again, then sending it once more", call.method, message
        )
        self.nursery.start_soon(self._send_again, call)
        return True

    async def _send_again(self, call: Call) -> None:
        """After -32020: the tools' header declarations may have changed; the call goes once more with
        those of a fresh listing (its caller is answered by whatever the backend says then)."""
        await self.relist_tools()
        if self.link.inflight.get(call.call_id) is call:  # not cancelled or timed out meanwhile
            await self.link.send_frames([request_frame(call, self.link.envelope)])
