"""Clients of MCP 2026-07-28 on the stdio and WebSocket fronts, raw: no initialize, every request on its own.

A modern request carries its version, capabilities and client in `params._meta`; the gateway serves it
statelessly from that, beside (never instead of) a legacy session on the same connection. The backends here
are legacy test backends: what they answer reaches the modern client in its era's shape.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import orjson
import pytest
from support import (
    RawClient,
    backend_entry,
    connect,
    progress_and_sampling,
    raw_gateway,
    running,
    sdk_client,
    with_websocket,
    write_config,
)

from actors.protocol.eras import (
    CLIENT_CAPABILITIES_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
)

MODERN: Final = "2026-07-28"
NAME: Final = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CLIENT_INFO: Final = {"name": "raw-modern", "version": "1"}


def envelope(
    version: str = MODERN, capabilities: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    meta = {
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: capabilities or {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    return {**meta, **extra}


def modern(params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """Request params carrying the modern envelope (plus `meta`'s keys in `_meta`)."""
    return {**(params or {}), "_meta": envelope(**meta)}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", "--resources", "--prompts", "--instructions=alpha's advice")],
        name="modern-gateway",
    )


@pytest.fixture
async def gateway(config: Path, tmp_path: Path) -> RawClient:
    async with raw_gateway(config, tmp_path / "gateway.log") as client:
        yield client  # type: ignore[misc]


def server_info(result: dict[str, Any]) -> Any:
    return result["_meta"][SERVER_INFO_KEY]


async def test_a_modern_client_is_served_without_initialize(gateway: RawClient) -> None:
    await gateway.request(1, "tools/list", modern())
    listed = (await gateway.answer_to(1))["result"]
    assert "echo" in [tool["name"] for tool in listed["tools"]]
    assert listed["resultType"] == "complete"
    assert (listed["ttlMs"], listed["cacheScope"]) == (0, "private")
    assert server_info(listed)["name"] == "modern-gateway"

    await gateway.request(2, "tools/call", modern({"name": "echo", "arguments": {"text": "no handshake"}}))
    called = (await gateway.answer_to(2))["result"]
    assert called["structuredContent"] == {"text": "no handshake"}
    assert called["resultType"] == "complete"
    assert "ttlMs" not in called  # a call's result is not cacheable

    await gateway.request(3, "resources/read", modern({"uri": "test://alpha/readme"}))
    read = (await gateway.answer_to(3))["result"]
    assert read["contents"][0]["text"] == "[alpha] test://alpha/readme"
    assert (read["resultType"], read["ttlMs"], read["cacheScope"]) == ("complete", 0, "private")

    await gateway.request(4, "prompts/get", modern({"name": "greet", "arguments": {"who": "Ada"}}))
    assert (await gateway.answer_to(4))["result"]["resultType"] == "complete"


async def test_server_discover_says_what_the_gateway_serves(gateway: RawClient) -> None:
    await gateway.request("d", "server/discover", modern())
    result = (await gateway.answer_to("d"))["result"]
    assert result["supportedVersions"] == [MODERN]
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert "prompts" in result["capabilities"] and "resources" in result["capabilities"]
    assert "alpha's advice" in result["instructions"]
    assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
    assert server_info(result) == {"name": "modern-gateway", "version": server_info(result)["version"]}


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"]
)
async def test_a_method_the_era_removed_is_unknown(gateway: RawClient, method: str) -> None:
    await gateway.request(1, method, modern({"uri": "test://shared", "level": "info"}))
    answer = await gateway.answer_to(1)
    assert answer["error"]["code"] == -32601
    await gateway.request(2, "no/such/method", modern())
    assert (await gateway.answer_to(2))["error"]["code"] == -32601


async def test_bad_envelopes_and_versions_get_their_errors_and_echo_the_id(gateway: RawClient) -> None:
    await gateway.request("v", "tools/list", modern(version="2099-01-01"))
    answer = await gateway.answer_to("v")
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}

    await gateway.request("c", "tools/list", {"_meta": {PROTOCOL_VERSION_KEY: MODERN}})
    answer = await gateway.answer_to("c")
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["envelope"]["key"] == CLIENT_CAPABILITIES_KEY

    for n, version in enumerate([7, ["2026-07-28"], "x" * 100_000, "2026-07-28\x1b[2J"]):
        await gateway.request(n, "tools/list", modern(version=version))  # type: ignore[arg-type]
        answer = await gateway.answer_to(n)
        assert answer["error"]["code"] in (-32602, -32022), answer

    await gateway.request("l", "tools/list", modern(**{LOG_LEVEL_KEY: "loud"}))
    assert (await gateway.answer_to("l"))["error"]["data"]["envelope"]["key"] == LOG_LEVEL_KEY

    await gateway.request("t", "tools/list", modern(progressToken=[1]))
    assert (await gateway.answer_to("t"))["error"]["code"] == -32602  # the rest of _meta is checked too

    # and the connection goes on
    await gateway.request("ok", "tools/list", modern())
    assert "result" in await gateway.answer_to("ok")


async def test_a_resource_nobody_has_is_invalid_params_with_its_uri(gateway: RawClient) -> None:
    missing = "test-none://nothing/here"
    await gateway.request(1, "resources/read", modern({"uri": missing}))
    error = (await gateway.answer_to(1))["error"]
    assert (error["code"], error["data"]) == (-32602, {"uri": missing})


async def test_discover_then_initialize_is_a_legacy_session(gateway: RawClient) -> None:
    """As an editor that probes first and then speaks 2025-11-25 (Claude Code does)."""
    await gateway.request("probe", "server/discover", modern())
    assert (await gateway.answer_to("probe"))["result"]["supportedVersions"] == [MODERN]
    assert (await gateway.initialize())["result"]["protocolVersion"] == "2025-11-25"
    await gateway.call(1, "echo", text="legacy")
    assert (await gateway.answer_to(1))["result"]["structuredContent"] == {"text": "legacy"}


async def test_the_eras_share_a_connection_without_pinning_it(gateway: RawClient) -> None:
    await gateway.request(1, "tools/list", modern())
    assert (await gateway.answer_to(1))["result"]["resultType"] == "complete"
    assert "result" in await gateway.initialize()  # a legacy session starts beside it
    await gateway.request(2, "tools/list")
    legacy = (await gateway.answer_to(2))["result"]
    assert "resultType" not in legacy and "ttlMs" not in legacy  # legacy bytes as they always were
    await gateway.request(3, "tools/list", modern())
    assert (await gateway.answer_to(3))["result"]["resultType"] == "complete"
    await gateway.request(4, "ping")
    assert (await gateway.answer_to(4))["result"] == {}


async def test_log_messages_reach_a_modern_call_only_at_the_level_it_asked(gateway: RawClient) -> None:
    arguments = {"name": "log", "arguments": {"level": "warning", "data": "careful"}}
    await gateway.request(1, "tools/call", modern(arguments, **{LOG_LEVEL_KEY: "info"}))
    messages = await gateway.receive_until(lambda message: message.get("id") == 1)
    logs = [m for m in messages if m.get("method") == "notifications/message"]
    assert [m["params"]["data"] for m in logs] == ["careful"]
    assert messages[-1]["result"]["resultType"] == "complete"

    for n, meta in enumerate([{LOG_LEVEL_KEY: "error"}, {}], start=2):  # above the message's level; none
        await gateway.request(n, "tools/call", modern(arguments, **meta))
        messages = await gateway.receive_until(lambda message, n=n: message.get("id") == n)  # type: ignore[misc]
        assert [m.get("method") for m in messages] == [None]


async def test_a_modern_call_can_be_cancelled_and_tracks_progress(gateway: RawClient) -> None:
    await gateway.request(0, "tools/list", modern())  # past the first settle: calls are forwarded as read
    await gateway.answer_to(0)
    await gateway.request(1, "tools/call", modern({"name": "sleep", "arguments": {"seconds": 60}}))
    await gateway.notify("notifications/cancelled", {"requestId": 1, "reason": "changed my mind"})
    await gateway.request(2, "tools/call", modern({"name": "cancelled_requests", "arguments": {}}))
    messages = await gateway.receive_until(lambda message: message.get("id") == 2)
    assert [m.get("id") for m in messages] == [2]  # nothing for the cancelled call
    assert len(messages[-1]["result"]["structuredContent"]["cancelled"]) == 1  # the backend was told

    params = {"name": "progress", "arguments": {"steps": 2}}
    await gateway.request(3, "tools/call", modern(params, progressToken="p"))
    messages = await gateway.receive_until(lambda message: message.get("id") == 3)
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [("p", 1), ("p", 2)]


async def test_a_backend_asking_a_modern_client_for_what_it_lacks_fails_the_call_with_32021(
    gateway: RawClient,
) -> None:
    sampling = {"method": "sampling/createMessage", "params": {"messages": []}}
    await gateway.request(1, "tools/call", modern({"name": "ask_client", "arguments": sampling}))
    messages = await gateway.receive_until(lambda message: message.get("id") == 1)
    assert len(messages) == 1  # no request ever reaches a modern client
    error = messages[0]["error"]
    assert (error["code"], error["data"]) == (-32021, {"requiredCapabilities": {"sampling": {}}})


async def test_a_backends_ask_becomes_input_required_and_the_retry_answers_it(gateway: RawClient) -> None:
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    params = {"name": "ask_client", "arguments": sampling}
    capable = {"capabilities": {"sampling": {}}}
    await gateway.request(1, "tools/call", modern(params, **capable))
    first = (await gateway.answer_to(1))["result"]
    assert first["resultType"] == "input_required"
    ((key, asked),) = first["inputRequests"].items()
    assert asked["params"].pop("_meta")["traceparent"]  # the call's trace context, carried by the backend
    assert asked == {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    state = first["requestState"]

    sampled = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
    await gateway.request(
        2,
        "tools/call",
        modern({**params, "inputResponses": {key: sampled}, "requestState": tampered}, **capable),
    )
    assert (await gateway.answer_to(2))["error"]["code"] == -32602  # a state the gateway did not sign
    other = {"name": "ask_client", "arguments": {**sampling, "timeout_s": 5}}
    await gateway.request(
        3, "tools/call", modern({**other, "inputResponses": {key: sampled}, "requestState": state}, **capable)
    )
    assert (await gateway.answer_to(3))["error"]["code"] == -32602  # not this request's state

    retry = {**params, "inputResponses": {key: sampled, "unknown": {"x": 1}}, "requestState": state}
    await gateway.request(4, "tools/call", modern(retry, **capable))
    done = (await gateway.answer_to(4))["result"]
    assert done["resultType"] == "complete"
    assert done["structuredContent"]["result"] == sampled  # what the backend's request got back

    await gateway.request(5, "tools/call", modern(retry, **capable))
    assert (await gateway.answer_to(5))["error"]["code"] == -32602  # a state is good once


async def test_a_batch_holding_a_modern_request_is_refused(gateway: RawClient) -> None:
    await gateway.initialize("2025-03-26")  # the one version with batches
    await gateway.send_line(
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"'
        + PROTOCOL_VERSION_KEY.encode()
        + b'":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}},'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}]'
    )
    batch = await gateway.next_line()
    assert b"-32600" in batch and b'"id":2' in batch


async def test_a_modern_websocket_client_needs_no_initialize(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]))
    async with running(config) as gateway, connect(gateway.websocket_url or "", initialize=False) as client:
        assert gateway.listener is not None
        (session,) = gateway.listener.sessions()
        await client.request(0, "ping")  # legacy, allowed before initialize: the session is running
        assert "result" in await client.answer_to(0)
        assert session.initialize_deadline() < math.inf  # a network client must show it speaks MCP
        await client.request(1, "tools/call", modern({"name": "echo", "arguments": {"text": "ws"}}))
        assert (await client.answer_to(1))["result"]["structuredContent"] == {"text": "ws"}
        assert session.initialize_deadline() == math.inf  # it did: a modern request needs no initialize
        await client.request(2, "server/discover", modern())
        discovered = (await client.answer_to(2))["result"]
        assert "prompts" not in discovered["capabilities"]  # alpha has tools (and logging) only
        for n, method in enumerate(["prompts/list", "resources/read", "completion/complete"], start=3):
            await client.request(n, method, modern({"uri": "test://shared"}))  # not declared: unknown
            assert (await client.answer_to(n))["error"]["code"] == -32601


async def test_the_python_sdk_pinned_to_2026_uses_the_gateway_over_stdio(
    config: Path, tmp_path: Path
) -> None:
    """The official Python SDK's modern client: no discover, no initialize; lists, calls, reads and logs."""
    logged: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        reply = types.TextContent(type="text", text="sampled across the eras")
        return types.CreateMessageResult(role="assistant", content=reply, model="m")

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    callbacks = {"logging_callback": on_log, "sampling_callback": sample, "elicitation_callback": elicit}
    log = tmp_path / "gateway.log"
    async with sdk_client(config, log, mode=MODERN, log_level="info", **callbacks) as client:
        assert client.protocol_version == MODERN
        listed = await client.list_tools(cache_mode="bypass")
        assert "echo" in [tool.name for tool in listed.tools]
        echoed = await client.call_tool("echo", {"text": "from the 2026 era"})
        assert echoed.structured_content == {"text": "from the 2026 era"}
        read = await client.read_resource("test://alpha/readme")
        assert read.contents[0].text == "[alpha] test://alpha/readme"  # type: ignore[union-attr]
        failed = await client.call_tool("fail", {"message": "as asked"})
        assert failed.is_error is True
        await client.call_tool("log", {"level": "warning", "data": "heard"})
        await progress_and_sampling(client, "sampled across the eras")  # the bridge, run by the SDK's loop
        elicit = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": NAME}}
        elicited = await client.call_tool("ask_client", elicit)
        assert elicited.structured_content["result"] == {"action": "accept", "content": {"name": "Ada"}}  # type: ignore[index]
    assert logged == ["heard"]  # before its call's answer, so here by now


def subscription(message: dict[str, Any]) -> Any:
    return message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]


async def test_listen_acknowledges_what_it_honours_then_notifies_under_its_id(gateway: RawClient) -> None:
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": False,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["test://shared", "test-none://nobody"],
    }
    await gateway.request("L", "subscriptions/listen", modern({"notifications": wanted}))
    ack = await gateway.receive()
    assert ack["method"] == "notifications/subscriptions/acknowledged" and subscription(ack) == "L"
    assert ack["params"]["notifications"] == {
        "toolsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["test://shared"],  # nobody owns the other one
    }

    await gateway.request(1, "tools/call", modern({"name": "touch", "arguments": {"uri": "test://shared"}}))
    messages = await gateway.receive_until(
        lambda message: message.get("method") == "notifications/resources/updated"
    )
    assert messages[-1]["params"]["uri"] == "test://shared" and subscription(messages[-1]) == "L"

    await gateway.request(2, "tools/call", modern({"name": "set_tools", "arguments": {"extra": ["added"]}}))
    changed = await gateway.receive_until(
        lambda message: message.get("method") == "notifications/tools/list_changed"
    )
    assert subscription(changed[-1]) == "L"

    await gateway.notify("notifications/cancelled", {"requestId": "L"})  # the client stops listening
    await gateway.request(3, "tools/call", modern({"name": "touch", "arguments": {"uri": "test://shared"}}))
    messages = await gateway.receive_until(lambda message: message.get("id") == 3)
    assert [m.get("method") for m in messages if m.get("id") != 1] == [None]  # no answer to L, no update
    assert messages[-1]["result"]["structuredContent"] == {"notified": False}, messages  # unsubscribed there


async def test_listen_refuses_malformed_filters_and_ends_gracefully_at_shutdown(gateway: RawClient) -> None:
    malformed = [
        [],
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "test://shared"},
        {"resourceSubscriptions": ["test://" + "x" * 10_000]},
    ]
    for n, wanted in enumerate(malformed):
        await gateway.request(n, "subscriptions/listen", modern({"notifications": wanted}))
        assert (await gateway.answer_to(n))["error"]["code"] == -32602
    await gateway.request("L", "subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}))
    assert (await gateway.receive())["method"] == "notifications/subscriptions/acknowledged"
    await gateway.close_stdin()  # the client is done: the gateway ends the listen with its graceful result
    answer = await gateway.answer_to("L")
    assert (
        answer["result"]["resultType"] == "complete"
        and answer["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"
    )


async def test_a_url_elicitation_a_legacy_backend_requires_is_a_round_and_the_retry_calls_again(
    gateway: RawClient,
) -> None:
    """2025-11-25's -32042 (open this URL, then call again) becomes a round of URL elicitations."""
    url = {"elicitationId": "e-1", "url": "https://auth.example/login", "message": "Sign in"}
    arguments = {"code": -32042, "message": "URL elicitation required", "data": {"elicitations": [url]}}
    params = {"name": "rpc_error", "arguments": arguments}
    await gateway.request(1, "tools/call", modern(params))
    error = (await gateway.answer_to(1))["error"]
    assert (error["code"], error["data"]) == (-32021, {"requiredCapabilities": {"elicitation": {"url": {}}}})

    capable = {"capabilities": {"elicitation": {"url": {}}}}
    await gateway.request(2, "tools/call", modern(params, **capable))
    round_ = (await gateway.answer_to(2))["result"]
    assert round_["resultType"] == "input_required"
    assert round_["inputRequests"] == {
        "e-1": {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in", "url": "https://auth.example/login"},
        }
    }
    retry = {
        **params,
        "inputResponses": {"e-1": {"action": "accept"}},
        "requestState": round_["requestState"],
    }
    await gateway.request(3, "tools/call", modern(retry, **capable))
    again = (await gateway.answer_to(3))["result"]
    assert again["resultType"] == "input_required"  # called again as new: this backend asks every time


async def test_listens_sent_together_are_capped_at_64_per_session(gateway: RawClient) -> None:
    """The cap is counted from each listen's start: 100 sent in one write cannot all pass it."""
    wanted = {"notifications": {"toolsListChanged": True}}
    listen = {"jsonrpc": "2.0", "method": "subscriptions/listen", "params": modern(wanted)}
    lines = [orjson.dumps({**listen, "id": f"L{n}"}) for n in range(100)]
    await gateway.send_line(b"\n".join(lines))
    acknowledged, refused = set(), set()
    while len(acknowledged) + len(refused) < 100:
        message = await gateway.receive()
        if message.get("method") == "notifications/subscriptions/acknowledged":
            acknowledged.add(subscription(message))
        elif "error" in message:
            assert "Too many listens" in message["error"]["message"]
            refused.add(message["id"])
    assert len(acknowledged) == 64 and len(refused) == 36


def watching(uris: list[str]) -> dict[str, Any]:
    return modern({"notifications": {"resourceSubscriptions": uris}})


async def test_a_session_watches_at_most_1024_resources_across_its_listens(gateway: RawClient) -> None:
    many = [f"test://alpha/items/{n}" for n in range(1000)]
    await gateway.request("A", "subscriptions/listen", watching(many))
    ack = await gateway.receive()
    assert len(ack["params"]["notifications"]["resourceSubscriptions"]) == 1000
    more = [f"test://alpha/items/x{n}" for n in range(25)]
    await gateway.request("B", "subscriptions/listen", watching(more))
    error = (await gateway.answer_to("B"))["error"]
    assert error["data"]["limit"] == 1024 and "it watches 1000" in error["message"]
    await gateway.notify("notifications/cancelled", {"requestId": "A"})  # its 1000 are released
    await gateway.request("C", "subscriptions/listen", watching(more))
    ack = await gateway.receive_until(
        lambda message: message.get("method") == "notifications/subscriptions/acknowledged"
    )
    assert subscription(ack[-1]) == "C"
    assert len(ack[-1]["params"]["notifications"]["resourceSubscriptions"]) == 25
