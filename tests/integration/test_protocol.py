"""The stdio frontend at the wire: raw lines in, raw lines out, against a real gateway process.

These cover what the SDK client never sends: garbage, batches, requests before initialize, old versions.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support import RawClient, backend_entry, raw_gateway, read_log, write_config

PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo,sleep")], name="raw-gateway"
    )


@pytest.fixture
async def gateway(config: Path, tmp_path: Path) -> RawClient:
    async with raw_gateway(config, tmp_path / "gateway.log") as client:
        yield client  # type: ignore[misc]


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
async def test_a_supported_version_is_echoed(gateway: RawClient, version: str) -> None:
    answer = await gateway.initialize(version)
    result = answer["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "raw-gateway"
    assert result["capabilities"]["tools"] == {"listChanged": True}


async def test_an_unknown_version_gets_the_newest_we_support(gateway: RawClient) -> None:
    answer = await gateway.initialize("1999-01-01")
    assert answer["result"]["protocolVersion"] == "2025-11-25"


async def test_before_initialize_only_ping_and_initialize_are_served(gateway: RawClient) -> None:
    await gateway.request(1, "server/discover")
    assert (await gateway.answer_to(1))["error"]["code"] == -32601  # unknown method: at once, not -32002
    await gateway.request(2, "tools/list")
    assert (await gateway.answer_to(2))["error"]["code"] == -32002
    await gateway.request(3, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert (await gateway.answer_to(3))["error"]["code"] == -32002
    await gateway.request(4, "ping")
    assert await gateway.answer_to(4) == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert (await gateway.initialize())["result"]["protocolVersion"] == "2025-11-25"


async def test_malformed_lines_get_errors_and_never_end_the_session(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.send_line("this is not json")
    parse_error = await gateway.receive()
    assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
    await gateway.send_line('{"jsonrpc": "2.0", "id": 7, "method": ')  # cut short
    assert (await gateway.receive())["error"]["code"] == -32700
    await gateway.send_line("[1, 2, 3]")
    batch = await gateway.receive()
    assert batch["id"] is None and batch["error"]["code"] == -32600
    await gateway.send_line('"just a string"')
    assert (await gateway.receive())["error"]["code"] == -32600
    await gateway.send_line('{"jsonrpc": "2.0", "id": 8}')  # neither request nor response
    not_a_request = await gateway.receive()
    assert not_a_request == {"jsonrpc": "2.0", "id": 8, "error": not_a_request["error"]}
    assert not_a_request["error"]["code"] == -32600
    await gateway.send_line(b"\xff\xfe not utf-8")
    assert (await gateway.receive())["error"]["code"] == -32700
    await gateway.send_line("")
    await gateway.send_line("   ")
    await gateway.request(9, "tools/call", {"name": "echo", "arguments": {"text": "still alive"}})
    answer = await gateway.receive()  # the blank lines got no answer: this is the next thing written
    assert answer["id"] == 9 and answer["result"]["structuredContent"] == {"text": "still alive"}


async def test_notifications_never_get_a_response(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.notify("notifications/whatever", {"x": 1})
    await gateway.notify("notifications/cancelled", {"requestId": 12345})
    await gateway.notify("tools/list")  # a method we know, sent as a notification: still no answer
    await gateway.request(1, "ping")
    assert await gateway.receive() == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_bad_params_get_invalid_params(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.request(1, "tools/call", {"arguments": {}})
    assert (await gateway.answer_to(1))["error"]["code"] == -32602
    await gateway.request(2, "tools/call", {"name": "nope"})
    unknown = await gateway.answer_to(2)
    assert unknown["error"]["code"] == -32602 and "nope" in unknown["error"]["message"]
    await gateway.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1, 2]})
    assert (await gateway.answer_to(3))["error"]["code"] == -32602
    await gateway.request(4, "tools/list", {"cursor": ["not", "a", "string"]})
    assert (await gateway.answer_to(4))["error"]["code"] == -32602
    await gateway.request(5, "no/such/method")
    assert (await gateway.answer_to(5))["error"]["code"] == -32601


async def test_a_second_initialize_is_refused(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.request(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    assert (await gateway.answer_to(2))["error"]["code"] == -32600


async def test_a_duplicate_id_in_flight_is_refused(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.request(1, "tools/call", {"name": "sleep", "arguments": {"seconds": 600}})
    await gateway.request(1, "ping")
    duplicate = await gateway.receive()
    assert duplicate["id"] == 1 and duplicate["error"]["code"] == -32600
    await gateway.notify("notifications/cancelled", {"requestId": 1, "reason": "test is done"})
    await gateway.request(2, "ping")
    assert await gateway.receive() == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {},
    }  # the cancelled call is silent


async def test_requests_pipelined_behind_initialize_wait_for_it(gateway: RawClient) -> None:
    info = {"name": "pipeliner", "version": "0"}
    await gateway.request(
        0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
    )
    await gateway.notify("notifications/initialized")
    await gateway.request(1, "tools/call", {"name": "echo", "arguments": {"text": "right behind"}})
    messages = await gateway.receive_until(lambda message: message.get("id") == 1)
    assert messages[0]["id"] == 0 and messages[0]["result"]["protocolVersion"] == "2025-06-18"
    assert messages[-1]["result"]["structuredContent"] == {"text": "right behind"}


async def test_tool_entries_and_results_pass_through_untouched(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=echo,fail,add", "--page-size=1"),
            backend_entry("beta", "--only=echo"),
        ],
    )
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        await gateway.initialize()
        await gateway.request(1, "tools/list")
        tools = (await gateway.answer_to(1))["result"]["tools"]
        names = [tool["name"] for tool in tools]
        assert names == ["echo", "add", "fail", "beta__echo"]  # one per page, every page followed
        echo, beta_echo = tools[0], tools[3]
        assert echo["title"] == "Echo"
        assert echo["annotations"] == {"title": "Echo it back", "readOnlyHint": True, "idempotentHint": True}
        assert echo["icons"] == [
            {"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml", "sizes": ["any"]}
        ]
        assert echo["_meta"] == {"com.example/owner": "tests", "nested": {"kept": [1, 2, 3]}}
        assert echo["outputSchema"]["properties"] == {"text": {"type": "string"}}
        assert beta_echo == {**echo, "name": "beta__echo"}  # only the name differs

        await gateway.request(2, "tools/call", {"name": "fail", "arguments": {"message": "nope"}})
        assert (await gateway.answer_to(2))["result"] == {
            "content": [{"type": "text", "text": "nope"}],
            "isError": True,
        }
        await gateway.request(3, "tools/call", {"name": "beta__echo", "arguments": {"text": "hi"}})
        assert (await gateway.answer_to(3))["result"] == {
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"text": "hi"},
        }


async def test_the_gateway_serves_even_when_every_backend_is_down(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            {"name": "ghost", "command": "no-such-program-anywhere", "restart": {"policy": "temporary"}},
            backend_entry("broken", "--crash-on-start=5", restart={"policy": "temporary"}),
        ],
    )
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        assert (await gateway.initialize())["result"]["serverInfo"]["name"] == "mcp-gateway"
        await gateway.request(1, "tools/list")
        assert (await gateway.answer_to(1))["result"] == {"tools": []}
        await gateway.request(2, "ping")
        assert (await gateway.answer_to(2))["result"] == {}
    log = read_log(tmp_path / "gateway.log")
    assert "[backend=ghost]" in log and "not found" in log
    assert "[backend=broken]" in log and "exited with code 5" in log


async def test_batches_are_served_for_2025_03_26_and_refused_after(config: Path, tmp_path: Path) -> None:
    async with raw_gateway(config, tmp_path / "old.log") as old:
        await old.initialize("2025-03-26")
        await old.send_line(
            '[{"jsonrpc":"2.0","id":1,"method":"ping"},'
            '{"jsonrpc":"2.0","id":2,"method":"tools/call",'
            '"params":{"name":"echo","arguments":{"text":"in a batch"}}},'
            '{"jsonrpc":"2.0","method":"notifications/whatever"},'
            "7,"
            '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}]'
        )
        line = await old.next_line()
        answers = {message.get("id"): message for message in orjson.loads(line)}
        assert answers[1]["result"] == {}
        assert answers[2]["result"]["structuredContent"] == {"text": "in a batch"}
        assert answers[None]["error"]["code"] == -32600  # the element 7
        assert answers[3]["error"]["code"] == -32602
        assert len(answers) == 4  # nothing for the notification
        await old.send_line(
            '[{"jsonrpc":"2.0","method":"notifications/a"},{"jsonrpc":"2.0","method":"notifications/b"}]'
        )
        await old.request("after", "ping")
        assert await old.receive() == {
            "jsonrpc": "2.0",
            "id": "after",
            "result": {},
        }  # no answer to the batch
    async with raw_gateway(config, tmp_path / "new.log") as new:
        await new.initialize("2025-06-18")
        await new.send_line('[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
        refused = await new.receive()
        assert refused["id"] is None and refused["error"]["code"] == -32600


async def test_a_tool_policy_hides_and_renames_tools_at_the_gateway(tmp_path: Path) -> None:
    policy = {"deny": ["add"], "rename": {"echo": "say"}, "annotations": {"echo": {"openWorldHint": False}}}
    config = write_config(
        tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo,add,pid", tools=policy)]
    )
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        await gateway.initialize()
        await gateway.request(1, "tools/list")
        tools = {tool["name"]: tool for tool in (await gateway.answer_to(1))["result"]["tools"]}
        assert sorted(tools) == ["pid", "say"]
        assert tools["say"]["annotations"]["openWorldHint"] is False
        await gateway.call(2, "say", text="renamed")
        assert (await gateway.answer_to(2))["result"]["structuredContent"] == {"text": "renamed"}
        await gateway.call(3, "add", a=1, b=2)
        assert (await gateway.answer_to(3))["error"]["code"] == -32602  # hidden: as unknown as any other name


async def test_backend_log_messages_reach_the_client_at_its_level(tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=log")])
    async with raw_gateway(config, tmp_path / "gateway.log") as gateway:
        capabilities = (await gateway.initialize())["result"]["capabilities"]
        assert capabilities["logging"] == {}
        await gateway.call(1, "log", level="info", data="hello")
        seen = await gateway.receive_until(lambda m: m.get("method") == "notifications/message")
        assert seen[-1]["params"] == {"level": "info", "logger": "alpha", "data": "hello"}  # named by backend

        await gateway.request(2, "logging/setLevel", {"level": "error"})
        assert (await gateway.answer_to(2))["result"] == {}
        await gateway.call(3, "log", level="warning", data="below the level")
        await gateway.call(4, "log", level="error", data="at the level")
        messages = await gateway.receive_until(lambda m: m.get("params", {}).get("data") == "at the level")
        assert all(m.get("params", {}).get("data") != "below the level" for m in messages)
        await gateway.request(5, "logging/setLevel", {"level": "loud"})
        assert (await gateway.answer_to(5))["error"]["code"] == -32602
    assert "[backend=alpha] server log (testbackend): hello" in read_log(tmp_path / "gateway.log")


async def test_an_integer_beyond_64_bits_is_refused_never_rounded(gateway: RawClient) -> None:
    await gateway.initialize()
    await gateway.send_line(
        '{"jsonrpc":"2.0","id":5,"method":"tools/call",'
        '"params":{"name":"echo","arguments":{"text":"x","n":123456789012345678901234567890}}}'
    )
    answer = await gateway.answer_to(5)
    assert answer["error"]["code"] == -32602
    assert "123456789012345678901234567890 is outside 64 bits" in answer["error"]["message"]
    await gateway.request(6, "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
    assert (await gateway.answer_to(6))["result"]["structuredContent"] == {"text": "still here"}
