"""The era probe, a modern backend's listen, and what the era makes of errors and liveness, over a link
whose backend is played by the test: each frame the link writes is read here, and the answers go back
through the link's own reader."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from actors.backends.connection import BackendLink
from actors.backends.era import DISCOVER, BackendEraError, gateway_envelope, read_discover
from actors.backends.errors import BackendStartError
from actors.backends.health import watch_health
from actors.backends.listen import ACKNOWLEDGED, BackendListen
from actors.backends.modern import ModernRun, refused_version
from actors.backends.probe import EraState, probe
from actors.config import BackendEra, HealthConfig
from actors.config.tracing_schema import TracingSettings
from actors.protocol.envelopes import Call, Reply, ReplySlot
from actors.protocol.eras import CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY, SUBSCRIPTION_ID_KEY
from actors.protocol.messages import Notification, RpcError
from actors.telemetry.tracing import Tracing

CAPABILITIES = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}


@attrs.define
class PlayedBackend:
    """A Transport whose far end is the test: `written` gets each frame the link sends, `say` answers."""

    _said_send: trio.MemorySendChannel[bytes] = attrs.field(init=False)
    _said: trio.MemoryReceiveChannel[bytes] = attrs.field(init=False)
    _written_send: trio.MemorySendChannel[dict[str, Any]] = attrs.field(init=False)
    written: trio.MemoryReceiveChannel[dict[str, Any]] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._said_send, self._said = trio.open_memory_channel[bytes](16)
        self._written_send, self.written = trio.open_memory_channel[dict[str, Any]](16)

    async def receive(self) -> bytes | None:
        try:
            return await self._said.receive()
        except trio.EndOfChannel:
            return None

    async def send(self, frame: bytes) -> None:
        await self.send_many([frame])

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return False

    async def send_many(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            await self._written_send.send(orjson.loads(frame))

    async def aclose(self) -> None:
        pass

    async def say(self, message: dict[str, Any]) -> None:
        await self._said_send.send(orjson.dumps({"jsonrpc": "2.0", **message}))


@asynccontextmanager
async def played(modern: bool = False) -> AsyncIterator[tuple[PlayedBackend, BackendLink, trio.Nursery]]:
    backend = PlayedBackend()
    heard: list[Notification] = []
    link = BackendLink(
        name="alpha",
        transport=backend,  # type: ignore[arg-type]
        on_notification=heard.append,
        cancel_scope=trio.CancelScope(),
        envelope=gateway_envelope("gw") if modern else None,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.read, nursery)
        yield backend, link, nursery
        nursery.cancel_scope.cancel()


# --- the probe ----------------------------------------------------------------------------------------------


async def test_the_probe_sends_the_full_envelope_and_a_discover_result_makes_it_modern() -> None:
    async with played() as (backend, link, nursery):
        outcome: list[Any] = []

        async def run() -> None:
            outcome.append(await probe(link, "gw", 10.0, over_http=False))

        nursery.start_soon(run)
        sent = await backend.written.receive()
        assert sent["method"] == "server/discover" and type(sent["id"]) is int
        meta = sent["params"]["_meta"]
        assert meta[PROTOCOL_VERSION_KEY] == "2026-07-28" and meta[CLIENT_INFO_KEY]["name"] == "gw"
        discovered = {"supportedVersions": ["2026-07-28"], "capabilities": CAPABILITIES}
        await backend.say({"id": sent["id"], "result": discovered})
        await trio.testing.wait_all_tasks_blocked()
        (verdict,) = outcome
        assert verdict.era is BackendEra.MODERN and verdict.discovered == discovered


async def test_a_method_not_found_is_legacy_and_a_second_unsupported_version_is_an_error() -> None:
    async with played() as (backend, link, nursery):
        outcome: list[Any] = []

        async def run() -> None:
            try:
                outcome.append(await probe(link, "gw", 10.0, over_http=False))
            except BackendStartError as exc:
                outcome.append(exc)

        nursery.start_soon(run)
        sent = await backend.written.receive()
        await backend.say({"id": sent["id"], "error": {"code": -32601, "message": "Method not found"}})
        await trio.testing.wait_all_tasks_blocked()
        assert outcome[0].describe() == "legacy: server/discover got -32601 (Method not found)"
        nursery.start_soon(run)
        sent = await backend.written.receive()
        refusal = {"code": -32022, "message": "Unsupported", "data": {"supported": ["2026-07-28"]}}
        await backend.say({"id": sent["id"], "error": refusal})
        await trio.testing.wait_all_tasks_blocked()
        assert isinstance(outcome[1], BackendStartError)


@pytest.mark.parametrize("over_http", [False, True])
async def test_a_silent_server_is_legacy_on_stdio_and_an_error_over_http(
    autojump_clock: trio.testing.MockClock, over_http: bool
) -> None:
    async with played() as (_, link, _):
        if over_http:
            with pytest.raises(BackendStartError, match=r"got no answer within 2\.0s"):
                await probe(link, "gw", 2.0, over_http=True)
        else:
            verdict = await probe(link, "gw", 2.0, over_http=False)
            assert verdict.describe() == "legacy: server/discover got no answer within 2.0s"
        assert trio.current_time() == 2.0


# --- the listen ---------------------------------------------------------------------------------------------


def ack(listen: dict[str, Any]) -> dict[str, Any]:
    params = {
        "notifications": listen["params"]["notifications"],
        "_meta": {SUBSCRIPTION_ID_KEY: listen["id"]},
    }
    return {"method": ACKNOWLEDGED, "params": params}


async def listening(backend: PlayedBackend, listen: BackendListen, nursery: trio.Nursery) -> dict[str, Any]:
    """Start the listen actor (hearing its acknowledgements through the link, as the backend actor does)
    and acknowledge its first listen, which is returned."""
    listen.link.on_notification = lambda note: (
        listen.acknowledged(note.params) if note.method == ACKNOWLEDGED else None
    )

    async def start() -> None:
        await nursery.start(listen.run)

    nursery.start_soon(start)
    first = await backend.written.receive()
    await backend.say(ack(first))
    await trio.testing.wait_all_tasks_blocked()
    return first


def subscribe(call_id: int, uri: str, method: str = "resources/subscribe") -> Call:
    return Call(call_id, method, {"uri": uri}, "s1", ReplySlot())


async def test_a_subscription_opens_a_new_listen_and_cancels_the_old_once_it_is_acknowledged() -> None:
    async with played(modern=True) as (backend, link, nursery):
        listen = BackendListen(link=link, capabilities=CAPABILITIES, uris={"test://a"})
        first = await listening(backend, listen, nursery)
        assert first["method"] == "subscriptions/listen"
        assert first["params"]["notifications"] == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["test://a"],
        }
        assert first["params"]["_meta"][PROTOCOL_VERSION_KEY] == "2026-07-28"  # the gateway's own envelope
        assert listen.accepts({"_meta": {SUBSCRIPTION_ID_KEY: first["id"]}}) and listen.accepts({})
        call = subscribe(900, "test://b")
        listen.take(call)
        second = await backend.written.receive()
        assert second["params"]["notifications"]["resourceSubscriptions"] == ["test://a", "test://b"]
        assert not call.reply_to.filled  # not before the new listen is acknowledged
        await backend.say(ack(second))
        cancelled = await backend.written.receive()
        assert cancelled == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": first["id"], "reason": "the gateway listens with a new filter"},
        }
        assert (await call.reply_to.wait()) == Reply(result={})
        assert not listen.accepts({"_meta": {SUBSCRIPTION_ID_KEY: first["id"]}})  # heard once, not twice
        assert listen.uris == {"test://a", "test://b"}


async def test_a_refused_listen_keeps_the_old_and_the_subscription_gets_the_error() -> None:
    async with played(modern=True) as (backend, link, nursery):
        listen = BackendListen(link=link, capabilities=CAPABILITIES, uris=set())
        first = await listening(backend, listen, nursery)
        call = subscribe(901, "test://b")
        listen.take(call)
        second = await backend.written.receive()
        await backend.say({"id": second["id"], "error": {"code": -32603, "message": "too many"}})
        reply = await call.reply_to.wait()
        assert reply.error is not None and "refused: too many (code -32603)" in reply.error.message
        assert listen.accepts({"_meta": {SUBSCRIPTION_ID_KEY: first["id"]}}) and listen.uris == set()
        without = BackendListen(link=link, capabilities={"tools": {}}, uris=set())
        await nursery.start(without.run)  # nothing to listen for: no listen at all
        refused = subscribe(902, "test://c")
        without.take(refused)
        assert (await refused.reply_to.wait()).error.code == -32601  # type: ignore[union-attr]


async def test_a_listen_the_backend_ends_is_opened_again_after_a_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with played(modern=True) as (backend, link, nursery):
        listen = BackendListen(link=link, capabilities=CAPABILITIES, uris=set())
        first = await listening(backend, listen, nursery)
        began = trio.current_time()
        await backend.say({"id": first["id"], "result": {"resultType": "complete"}})
        again = await backend.written.receive()
        assert again["method"] == "subscriptions/listen" and again["id"] != first["id"]
        assert trio.current_time() - began == pytest.approx(1.0)


# --- what the era makes of errors -------------------------------------------------------------------------


async def test_a_header_mismatch_over_http_lists_the_tools_again_and_sends_the_call_once_more() -> None:
    async with played(modern=True) as (backend, link, nursery):
        relisted: list[int] = []

        async def relist_tools() -> None:
            relisted.append(1)

        era = EraState(era=BackendEra.AUTO, gateway_name="gw", probe_timeout_s=1.0)
        run = ModernRun(link=link, nursery=nursery, era=era, over_http=True, relist_tools=relist_tools)
        link.on_error = run.on_error
        traced = Tracing.start(TracingSettings(endpoint="http://127.0.0.1:9"), "gw", {})
        span, params = traced.client(None, 950, "tools/call", {"name": "regional", "arguments": {}}, "b")
        call = Call(950, "tools/call", params, "s1", ReplySlot(), span=span)
        await link.send_frames([link.frame_for(call)])
        sent = await backend.written.receive()
        mismatch = {"code": -32020, "message": "header mismatch"}
        await backend.say({"id": sent["id"], "error": mismatch})
        again = await backend.written.receive()
        assert again == sent and relisted == [1] and not call.reply_to.filled
        assert span.events is not None
        assert [name for _, name, _ in span.events] == ["mcp.gateway.sent_again"]  # one hop, two tries
        await backend.say({"id": sent["id"], "error": mismatch})  # a second time: the caller's answer
        reply = await call.reply_to.wait()
        assert reply.error is not None and reply.error.code == -32020 and relisted == [1]
        assert span.failure == "-32020" and span.ended  # ended with the caller's answer
        traced.exporter._post = lambda *_: None  # nothing listens at that port
        traced.shutdown(5.0)


async def test_unsupported_version_to_a_call_ends_the_run_and_the_era_is_probed_again() -> None:
    async with played(modern=True) as (backend, link, _):
        era = EraState(era=BackendEra.AUTO, gateway_name="gw", probe_timeout_s=1.0)
        era._known = read_discover({"supportedVersions": ["2026-07-28"], "capabilities": {}})
        link.on_error = partial(refused_version, era, link)
        call = Call(960, "tools/call", {"name": "echo"}, "s1", ReplySlot())
        await link.send_frames([link.frame_for(call)])
        sent = await backend.written.receive()
        refusal = {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2099-01-01"]},
        }
        await backend.say({"id": sent["id"], "error": refusal})
        reply = await call.reply_to.wait()
        assert (
            reply.error is not None and reply.error.code == -32000 and "probed again" in reply.error.message
        )
        assert isinstance(link.lost, BackendEraError) and era._known is None
        forced = EraState(era=BackendEra.MODERN, gateway_name="gw", probe_timeout_s=1.0)
        assert not refused_version(forced, link, call, RpcError(-32022, "x"))  # a pinned era passes it on


async def test_a_modern_backend_is_kept_alive_with_discover(autojump_clock: trio.testing.MockClock) -> None:
    async with played(modern=True) as (backend, link, nursery):
        nursery.start_soon(watch_health, link, HealthConfig(interval_s=5.0), DISCOVER)
        sent = await backend.written.receive()
        assert sent["method"] == "server/discover" and trio.current_time() == 5.0
        assert sent["params"]["_meta"][PROTOCOL_VERSION_KEY] == "2026-07-28"
