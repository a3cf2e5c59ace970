"""Modern (2026-07-28) requests in the dispatcher: the first settle, what a legacy backend is sent, how its
answers and errors are encoded, and the session's middleware per modern client."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from test_dispatch import dispatcher, tool

from actors.middleware import Middleware
from actors.protocol.envelopes import Ask, BackendCommand, BackendReady, Call, Cancel, Reply, ReplySlot
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY
from actors.protocol.errors import RESOURCE_NOT_FOUND, RpcError
from actors.protocol.messages import ErrorResponse, Notification, Request, Response
from actors.runtime.supervisor import ChildRestarting
from actors.session.settings import SessionState


def modern(params: dict[str, Any] | None = None, client: str = "c") -> dict[str, Any]:
    meta = {
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {},
        CLIENT_INFO_KEY: {"name": client, "version": "1"},
        "progressToken": 7,
        "traceparent": "00-abc-def-01",
    }
    return {**(params or {}), "_meta": meta}


async def test_a_modern_request_waits_for_the_first_settle_once() -> None:
    async with dispatcher(ready=False) as h:
        await h.inbox.send(Request(1, "tools/list", modern()))
        await trio.testing.wait_all_tasks_blocked()
        assert h.outbox.statistics().current_buffer_used == 0  # held: nothing is up yet
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (tool("a"),), calls))
        h.publish(ChildRestarting("two", RuntimeError("no"), 1.0))
        answer = await h.outbox.receive()
        assert isinstance(answer, Response) and [t["name"] for t in answer.result["tools"]] == ["a"]
        assert (
            h.actor is not None and h.actor.settings.first_settle.over and h.actor.state is SessionState.NEW
        )
        assert isinstance(await h.ask(2, "tools/list", modern()), Response)  # not held again


async def test_a_legacy_backend_gets_the_request_without_its_envelope_and_its_answer_is_encoded() -> None:
    async with dispatcher() as h:
        await h.inbox.send(Request("x", "tools/call", modern({"name": "echo", "arguments": {}})))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        assert call.params == {
            "name": "echo",
            "arguments": {},
            "_meta": {"progressToken": call.call_id, "traceparent": "00-abc-def-01"},
        }
        call.reply_to.fill(Reply(result={"content": []}))
        answer = await h.outbox.receive()
        assert isinstance(answer, Response)
        assert answer.result["resultType"] == "complete" and "ttlMs" not in answer.result
        assert answer.result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-gateway"


async def test_a_backend_not_finding_a_resource_is_invalid_params_naming_the_clients_uri() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        await h.inbox.send(Request("x", "tools/call", modern({"name": "echo"})))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        entry = h.actor.inflight.get("x")
        assert entry is not None and entry.modern is not None
        read = entry.modern.__class__(
            method="resources/read",
            envelope=entry.modern.envelope,
            params={"uri": "test://as/written"},
            server_info={},
        )
        mapped = read.error(RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": "own://form"}))
        assert (mapped.code, mapped.data) == (-32602, {"uri": "test://as/written"})
        other = RpcError(RESOURCE_NOT_FOUND, "something else")
        assert entry.modern.error(other) is other  # only a read's miss means "resource not found"
        call.reply_to.fill(Reply(error=other))
        answer = await h.outbox.receive()
        assert isinstance(answer, ErrorResponse) and answer.error == other


async def test_middleware_sees_each_modern_client_by_its_own_name() -> None:
    class HideFromGuests(Middleware):
        def filter_tools(self, client: Any, tools: Any) -> Any:
            return [t for t in tools if client.name != "guest" or t["name"] != "slow"]

    async with dispatcher(middleware=(HideFromGuests(),)) as h:
        names = {}
        for n, client in enumerate(["guest", "admin", "guest"]):
            answer = await h.ask(n, "tools/list", modern(client=client))
            assert isinstance(answer, Response)
            names[n] = [t["name"] for t in answer.result["tools"]]
        assert names == {0: ["echo", "two__echo"], 1: ["echo", "slow", "two__echo"], 2: names[0]}
        assert h.actor is not None and sorted(h.actor.modern_chains) == ["admin", "guest"]


async def test_each_call_says_whom_it_is_for_as_a_modern_backend_is_told() -> None:
    async with dispatcher() as h:
        await h.inbox.send(Request("m", "tools/call", modern({"name": "echo"}, client="modern-one")))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.envelope is not None
        assert call.envelope.client_info == {"name": "modern-one", "version": "1"}
        call.reply_to.fill(Reply(result={}))
        await h.outbox.receive()

        capabilities = {"sampling": {}, "roots": {"listChanged": True}}
        info = {"name": "legacy-one", "version": "2"}
        await h.ask(
            0,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": info},
        )
        await h.ask(1, "logging/setLevel", {"level": "warning"})
        await h.inbox.send(Request("l", "tools/call", {"name": "echo"}))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.envelope is not None
        assert (call.envelope.client_capabilities, call.envelope.client_info) == (capabilities, info)
        assert (call.envelope.version, call.envelope.log_level) == ("2026-07-28", "warning")


async def test_a_modern_backends_round_reaches_a_modern_client_with_its_state_sealed_inside_ours() -> None:
    async with dispatcher() as h:
        params = {"name": "echo", "arguments": {"text": "x"}}
        await h.inbox.send(Request(1, "tools/call", modern(params)))
        call = await h.backend.receive()
        assert isinstance(call, Call)
        asked = {"who": {"method": "elicitation/create", "params": {"message": "Name?"}}}
        own_state = "the backend's own state"
        call.reply_to.fill(
            Reply(result={"resultType": "input_required", "inputRequests": asked, "requestState": own_state})
        )
        first = await h.outbox.receive()
        assert isinstance(first, Response) and first.result["inputRequests"] == asked
        sealed = first.result["requestState"]
        assert sealed != own_state and sealed.startswith("v1.")

        retry = {
            **params,
            "inputResponses": {"who": {"action": "accept", "content": {"n": 1}}},
            "requestState": sealed,
        }
        await h.inbox.send(Request(2, "tools/call", modern(retry)))
        again = await h.backend.receive()
        assert isinstance(again, Call)
        assert (
            again.params is not None and again.params["requestState"] == own_state
        )  # the backend's, exactly
        assert again.params["inputResponses"] == retry["inputResponses"]
        again.reply_to.fill(Reply(result={"content": [], "resultType": "complete"}))
        done = await h.outbox.receive()
        assert isinstance(done, Response) and done.result["resultType"] == "complete"

        other = {"name": "slow", "arguments": {"text": "x"}, "requestState": sealed}
        refused = await h.ask(3, "tools/call", modern(other))  # another tool's retry with this state
        assert isinstance(refused, ErrorResponse) and refused.error.code == -32602


async def test_a_list_may_be_kept_as_long_as_its_shortest_backend_says_and_public_only_if_all_say_so() -> (
    None
):
    async with dispatcher(ready=False) as h:
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        h.publish(BackendReady("one", (tool("a"),), calls, list_hints={"tools": (5000, "public")}))
        h.publish(BackendReady("two", (tool("b"),), calls, list_hints={"tools": (2000, "public")}))
        listed = await h.ask(1, "tools/list", modern())
        assert isinstance(listed, Response)
        assert (listed.result["ttlMs"], listed.result["cacheScope"]) == (2000, "public")
        h.publish(BackendReady("two", (tool("b"),), calls))  # a legacy backend says nothing: 0, private
        listed = await h.ask(2, "tools/list", modern())
        assert isinstance(listed, Response)
        assert (listed.result["ttlMs"], listed.result["cacheScope"]) == (0, "private")


async def test_middleware_makes_every_list_private() -> None:
    async with dispatcher(ready=False, middleware=(Middleware(),)) as h:
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        for name in ("one", "two"):
            h.publish(BackendReady(name, (tool(name),), calls, list_hints={"tools": (5000, "public")}))
        listed = await h.ask(1, "tools/list", modern())
        assert isinstance(listed, Response)
        assert (listed.result["ttlMs"], listed.result["cacheScope"]) == (5000, "private")


async def test_a_bridged_call_its_client_cancels_or_leaves_keeps_nothing_in_the_gateways_table(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A modern call to a legacy backend is bridged (its place in the gateway's table of parked calls) from
    the start. Its client's cancel ends it there and at the backend, in the first round or in a retry's;
    a session that ends with one in flight ends it too."""
    with trio.fail_after(60):  # virtual time: the session's drain_s passes at once
        await _cancelled_in_either_round()
        await _left_with_one_in_flight()


async def _cancelled_in_either_round() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        table = h.actor.settings.bridges
        await h.inbox.send(Request("x", "tools/call", modern({"name": "echo", "arguments": {}})))
        call = await h.backend.receive()
        assert isinstance(call, Call) and len(table.calls) == 1 and dict(table.opened_by) == {"session:s1": 1}
        await h.inbox.send(Notification("notifications/cancelled", {"requestId": "x"}))
        assert await h.backend.receive() == Cancel(call.call_id, "cancelled by the client")
        assert (table.calls, dict(table.opened_by)) == ({}, {})

        # A retry's cancel: the backend asks, the client gets its round, retries, then gives up.
        asking = modern({"name": "echo", "arguments": {}})
        asking["_meta"][CLIENT_CAPABILITIES_KEY] = {"roots": {}}
        await h.inbox.send(Request("y", "tools/call", asking))
        call = await h.backend.receive()
        assert isinstance(call, Call) and call.asks_to is not None
        call.asks_to.send_nowait(Ask(1, "one", "roots/list", None, ReplySlot(), "r1"))
        round_one = await h.outbox.receive()
        assert isinstance(round_one, Response) and round_one.result["resultType"] == "input_required"
        state = round_one.result["requestState"]
        retry = {**asking, "requestState": state, "inputResponses": {"r1": {"roots": []}}}
        await h.inbox.send(Request("z", "tools/call", retry))
        await trio.testing.wait_all_tasks_blocked()
        await h.inbox.send(Notification("notifications/cancelled", {"requestId": "z"}))
        assert await h.backend.receive() == Cancel(call.call_id, "cancelled by the client")
        assert table.calls == {}


async def _left_with_one_in_flight() -> None:
    async with dispatcher() as h:
        assert h.actor is not None
        table = h.actor.settings.bridges
        await h.inbox.send(Request("x", "tools/call", modern({"name": "echo", "arguments": {}})))
        call = await h.backend.receive()
        assert isinstance(call, Call) and len(table.calls) == 1
        await h.inbox.aclose()  # the client is gone; after drain_s the session stops what is left
        assert await h.backend.receive() == Cancel(call.call_id, "the gateway is shutting down")
        await h.actor.inflight.wait_empty()
        assert table.calls == {}
