"""The Streamable HTTP front under MCP 2026-07-28: raw POSTs with no session, every check of the era's
order with its status and body, streams, cancellation, the session limits, and the official Python SDK
pinned to the era; the legacy sessions of the same listener beside them. The gateway runs in this process
with real backend processes behind it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import orjson
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, ROOT, backend_entry, running, with_http, write_config

from actors.gateway import Gateway
from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY

MODERN: Final = "2026-07-28"
FIXTURE: Final = ROOT / "tests" / "backends" / "conformance_fixture.py"
ABSENT: Final = object()  # a header override: leave the header out


def envelope(version: object = MODERN, capabilities: object = ABSENT, **extra: Any) -> dict[str, Any]:
    """A request's `_meta`: the era's envelope (`capabilities` ABSENT: none declared), then `extra`."""
    meta = {
        PROTOCOL_VERSION_KEY: version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    meta[CLIENT_CAPABILITIES_KEY] = {} if capabilities is ABSENT else capabilities
    return {**meta, **extra}


def modern(request_id: int, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A JSON-RPC request of the 2026 era: its params carry the envelope (`meta` as envelope() takes it)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": envelope(**meta)},
    }


def standard_headers(body: Any, **overrides: object) -> dict[str, str]:
    """The headers a client of the era sends with `body`, then `overrides` (ABSENT drops a header)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if isinstance(body, dict) and "method" in body:
        params = body.get("params") or {}
        headers["mcp-protocol-version"] = str(params.get("_meta", {}).get(PROTOCOL_VERSION_KEY, MODERN))
        headers["mcp-method"] = body["method"]
        named = params.get("uri" if body["method"] == "resources/read" else "name")
        if body["method"] in ("tools/call", "prompts/get", "resources/read") and isinstance(named, str):
            headers["mcp-name"] = named
    for name, value in overrides.items():
        name = name.replace("_", "-")
        headers.pop(name.lower(), None)
        if value is not ABSENT:
            headers[name] = str(value)
    return headers


async def post(http: httpx2.AsyncClient, url: str, body: Any, **overrides: object) -> httpx2.Response:
    return await http.post(url, content=orjson.dumps(body), headers=standard_headers(body, **overrides))


async def messages(response: httpx2.Response, fields: list[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response; the name of every other field it has goes in `fields`."""
    async for line in response.aiter_lines():
        name, _, value = line.partition(":")
        if name == "data":
            yield orjson.loads(value)
        elif line and not line.startswith(":"):
            fields.append(name)


def config_with(tmp_path: Path, *flags: str, **http: Any) -> Path:
    return with_http(write_config(tmp_path / "g.toml", [backend_entry("t", *flags)]), **http)


def one_request_sessions(gateway: Gateway) -> list[Any]:
    assert gateway.http_listener is not None
    by_id = {entry.session for entry in gateway.http_listener._sessions.values()}
    return [session for session in gateway.http_listener.sessions() if session not in by_id]


@attrs.frozen(kw_only=True)
class Rung:
    """One case of the era's checks: what is posted and the answer it gets."""

    name: str
    body: Any
    status: int
    code: int | None  # the JSON-RPC error code; None: a result
    headers: dict[str, object] = attrs.field(factory=dict)


def rung(name: str, body: Any, status: int, code: int | None, **headers: object) -> Rung:
    return Rung(name=name, body=body, status=status, code=code, headers=headers)


ECHO: Final = {"name": "echo", "arguments": {"text": "hi"}}
FAIL_WITH: Final = "rpc_error"  # the test backend's tool that answers with the JSON-RPC error it is given
AT_VERSION: Final = {"MCP_Protocol_Version": MODERN}
LADDER: Final = [
    rung("a posted response", {"jsonrpc": "2.0", "id": 1, "result": {}}, 400, -32600, **AT_VERSION),
    rung("a batch with a modern request", [modern(2, "tools/list")], 400, -32600),
    rung(
        "header and body name two versions", modern(3, "tools/list", version="v9"), 400, -32020, **AT_VERSION
    ),
    rung("a version not served", modern(4, "tools/list", version="v9"), 400, -32022),
    rung("an envelope without capabilities", modern(5, "tools/list", capabilities=None), 400, -32602),
    rung(
        "a modern header over no envelope", {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, 400, -32602
    ),
    rung("no MCP-Protocol-Version", modern(7, "tools/list"), 400, -32020, MCP_Protocol_Version=ABSENT),
    rung("no Mcp-Method", modern(8, "tools/list"), 400, -32020, Mcp_Method=ABSENT),
    rung("Mcp-Method of another method", modern(9, "tools/list"), 400, -32020, Mcp_Method="prompts/list"),
    rung("Mcp-Method in capitals", modern(10, "tools/list"), 400, -32020, Mcp_Method="TOOLS/LIST"),
    rung("no Mcp-Name", modern(11, "tools/call", ECHO), 400, -32020, Mcp_Name=ABSENT),
    rung("Mcp-Name of another tool", modern(12, "tools/call", ECHO), 400, -32020, Mcp_Name="add"),
    rung(
        "Mcp-Name a bad sentinel", modern(13, "tools/call", ECHO), 400, -32020, Mcp_Name="=?base64?ZWNobw?="
    ),
    rung("a removed method", modern(14, "initialize"), 404, -32601),
    rung("an unknown method", modern(15, "no/such/method"), 404, -32601),
    rung("a feature no backend offers", modern(16, "prompts/list"), 404, -32601),
    # the earliest check that fails answers
    rung(
        "era before envelope",
        modern(17, "tools/list", version="v9", capabilities=None),
        400,
        -32020,
        **AT_VERSION,
    ),
    rung(
        "envelope before headers", modern(18, "tools/list", capabilities=None), 400, -32602, Mcp_Method=ABSENT
    ),
    rung("headers before method", modern(19, "no/such/method"), 400, -32020, Mcp_Method=ABSENT),
    # served (values with spaces around them: httpx sends none, so the unit tests have them)
    rung("header names of any case", modern(20, "tools/call", ECHO), 200, None, MCP_NAME="echo"),
    rung("Mcp-Name as a sentinel", modern(21, "tools/call", ECHO), 200, None, Mcp_Name="=?base64?ZWNobw==?="),
    rung("a stale Mcp-Session-Id is ignored", modern(22, "tools/list"), 200, None, Mcp_Session_Id="gone"),
    rung("params are checked in band", modern(23, "tools/call", {"arguments": {}}), 200, -32602),
    rung(
        "a backend's -32021 is 400",
        modern(24, "tools/call", {"name": FAIL_WITH, "arguments": {"code": -32021, "message": "no"}}),
        400,
        -32021,
    ),
    rung(
        "a backend's other errors ride 200",
        modern(25, "tools/call", {"name": FAIL_WITH, "arguments": {"code": -32603, "message": "no"}}),
        200,
        -32603,
    ),
]


async def test_each_check_answers_in_the_eras_order_with_its_status_and_the_request_id(
    tmp_path: Path,
) -> None:
    async with running(config_with(tmp_path, "--resources")) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        wrong: list[str] = []
        with trio.fail_after(DEADLINE_S):
            for case in LADDER:
                response = await post(http, url, case.body, **case.headers)
                answer = response.json()
                code = answer.get("error", {}).get("code")
                request_id = case.body.get("id") if isinstance(case.body, dict) else None
                if (response.status_code, code, answer["id"]) != (case.status, case.code, request_id):
                    wrong.append(f"{case.name}: HTTP {response.status_code} {answer}")
                if "mcp-session-id" in response.headers:
                    wrong.append(f"{case.name}: a session id was given")
        assert not wrong, "\n".join(wrong)


async def test_refusals_say_what_they_refuse(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        unsupported = (await post(http, url, modern(1, "tools/list", version="v9"))).json()["error"]
        assert unsupported["data"] == {"supported": [MODERN], "requested": "v9"}
        mismatch = (await post(http, url, modern(2, "tools/list"), Mcp_Method="prompts/list")).json()["error"]
        assert mismatch["data"] == {
            "header": "Mcp-Method",
            "mismatch": {"header": "prompts/list", "body": "tools/list"},
        }
        for method in ("GET", "DELETE"):
            refused = await http.request(
                method, url, headers={"mcp-protocol-version": MODERN, "accept": "*/*"}
            )
            assert (refused.status_code, refused.headers["allow"]) == (405, "POST")
        notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert (await post(http, url, notification, MCP_Protocol_Version=MODERN)).status_code == 202


async def test_lists_calls_and_reads_need_no_session(tmp_path: Path) -> None:
    async with running(config_with(tmp_path, "--resources")) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        listed = await post(http, url, modern(1, "tools/list"))
        assert listed.headers["content-type"].startswith("application/json")
        result = listed.json()["result"]
        assert "echo" in [tool["name"] for tool in result["tools"]]
        assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
        called = (await post(http, url, modern(2, "tools/call", ECHO))).json()["result"]
        assert called["structuredContent"] == {"text": "hi"} and called["resultType"] == "complete"
        read = (await post(http, url, modern(3, "resources/read", {"uri": "test://t/readme"}))).json()[
            "result"
        ]
        assert read["contents"][0]["text"] == "[t] test://t/readme"
        discovered = (await post(http, url, modern(4, "server/discover"))).json()["result"]
        assert discovered["supportedVersions"] == [MODERN]
        assert gateway.http_listener is not None and len(gateway.http_listener._sessions) == 0
        with trio.fail_after(DEADLINE_S):
            for session in one_request_sessions(gateway):
                await session.done.wait()  # each ends once its answer is written


async def test_a_call_with_notifications_streams_them_without_event_ids(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        body = modern(1, "tools/call", {"name": "progress", "arguments": {"steps": 2}}, progressToken="p")
        fields: list[str] = []
        with trio.fail_after(DEADLINE_S):
            async with http.stream(
                "POST", url, content=orjson.dumps(body), headers=standard_headers(body)
            ) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                assert response.headers["x-accel-buffering"] == "no"
                received = [message async for message in messages(response, fields)]
        assert set(fields) == {"event"}  # no id: and no retry: (nothing resumes), no priming event
        assert [(m["params"]["progressToken"], m["params"]["progress"]) for m in received[:-1]] == [
            ("p", 1),
            ("p", 2),
        ]
        assert received[-1]["id"] == 1 and received[-1]["result"]["resultType"] == "complete"


async def test_closing_a_streamed_call_cancels_it_at_the_backend(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        slow = {"name": "progress", "arguments": {"steps": 2, "delay": 60}}
        body = modern(1, "tools/call", slow, progressToken="p")
        with trio.fail_after(DEADLINE_S):
            async with http.stream(
                "POST", url, content=orjson.dumps(body), headers=standard_headers(body)
            ) as response:
                async for message in messages(response, []):
                    assert message["method"] == "notifications/progress"  # the backend is running it
                    break
                (session,) = one_request_sessions(gateway)
            await session.done.wait()  # the client hung up: the session cancelled the call and ended
            answer = await post(
                http, url, modern(2, "tools/call", {"name": "cancelled_requests", "arguments": {}})
            )
        assert len(answer.json()["result"]["structuredContent"]["cancelled"]) == 1


async def test_shutdown_answers_a_modern_call_in_flight(tmp_path: Path) -> None:
    async with httpx2.AsyncClient() as http:
        async with running(config_with(tmp_path)) as gateway:
            url = gateway.http_url
            assert url is not None
            slow = {"name": "progress", "arguments": {"steps": 2, "delay": 60}}
            body = modern(1, "tools/call", slow, progressToken="p")
            received: list[dict[str, Any]] = []
            with trio.fail_after(DEADLINE_S):
                async with http.stream(
                    "POST", url, content=orjson.dumps(body), headers=standard_headers(body)
                ) as response:
                    async for message in messages(response, []):
                        received.append(message)
                        if len(received) == 1:  # running at the backend
                            gateway.stop()
        progress, answer = received
        assert progress["method"] == "notifications/progress"
        assert answer["id"] == 1 and "error" in answer


@pytest.mark.parametrize(
    ("limit", "status"), [({"max_sessions_per_client": 2}, 429), ({"max_sessions": 2}, 503)]
)
async def test_requests_in_flight_are_bounded_with_legacy_sessions(
    tmp_path: Path, limit: dict[str, int], status: int
) -> None:
    async with running(config_with(tmp_path, **limit)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None

        async def held_call(
            number: int, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
        ) -> None:
            slow = {"name": "progress", "arguments": {"steps": 2, "delay": 60}}
            body = modern(number, "tools/call", slow, progressToken=number)
            async with http.stream(
                "POST", url, content=orjson.dumps(body), headers=standard_headers(body)
            ) as response:
                async for _ in messages(response, []):
                    task_status.started()  # running at the backend; held until cancelled

        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                for number in (1, 2):
                    await nursery.start(held_call, number)
                held = one_request_sessions(gateway)
                refused = await post(http, url, modern(3, "tools/list"))
                assert (refused.status_code, refused.json()["id"]) == (status, 3)
                initialize = {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "1"},
                    },
                }
                legacy = await http.post(url, json=initialize, headers=standard_headers(None))
                assert legacy.status_code == status  # one count for both eras
                nursery.cancel_scope.cancel()
            for session in held:
                await session.done.wait()
            assert (await post(http, url, modern(5, "tools/list"))).status_code == 200


async def test_legacy_sessions_go_on_beside_modern_requests(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None and gateway.http_listener is not None
        with trio.fail_after(DEADLINE_S):
            async with Client(streamable_http_client(url), mode="legacy") as client:
                (session_id,) = gateway.http_listener._sessions
                modern_call = await post(http, url, modern(1, "tools/call", ECHO), Mcp_Session_Id=session_id)
                assert modern_call.json()["result"]["resultType"] == "complete"
                legacy = await client.call_tool("echo", {"text": "legacy"})
                assert legacy.structured_content == {"text": "legacy"}
                assert list(gateway.http_listener._sessions) == [session_id]  # nothing new, nothing ended


async def test_mcp_param_headers_must_agree_with_the_arguments(tmp_path: Path) -> None:
    fixture = {"name": "fixture", "command": sys.executable, "args": [str(FIXTURE)]}
    config = with_http(write_config(tmp_path / "g.toml", [fixture]))
    tool = "test_custom_header_tool"
    cases = [  # (the Mcp-Param-Region header, the region argument, the status)
        ("eu", "eu", 200),
        ("=?base64?ZXU=?=", "eu", 200),
        ("=?base64?ZXU", "=?base64?ZXU", 200),  # no suffix: a literal
        (ABSENT, "eu", 400),
        ("us", "eu", 400),
        ("=?base64?ZXU?=", "eu", 400),  # not padded
        ("eu", ABSENT, 400),  # a header with no value in the body
    ]
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        with trio.fail_after(DEADLINE_S):
            for number, (header, region, status) in enumerate(cases):
                arguments = {} if region is ABSENT else {"region": region}
                body = modern(number, "tools/call", {"name": tool, "arguments": arguments})
                response = await post(http, url, body, Mcp_Param_Region=header, Mcp_Param_Other="ignored")
                assert response.status_code == status, (header, region, response.text)
                if status == 400:
                    assert response.json()["error"]["code"] == -32020


async def test_the_python_sdk_pinned_to_2026_uses_the_http_front(tmp_path: Path) -> None:
    async with running(config_with(tmp_path, "--resources", "--prompts")) as gateway:
        url = gateway.http_url
        assert url is not None
        steps: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        with trio.fail_after(DEADLINE_S):
            async with Client(url, mode=MODERN) as client:
                assert client.protocol_version == MODERN
                assert "echo" in [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]
                echoed = await client.call_tool("echo", {"text": "over http"})
                assert echoed.structured_content == {"text": "over http"}
                done = await client.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
                assert done.content[0].text == "done 2"  # type: ignore[union-attr]
                read = await client.read_resource("test://t/readme")
                assert read.contents[0].text == "[t] test://t/readme"  # type: ignore[union-attr]
                prompt = await client.get_prompt("greet", {"who": "Ada"})
                assert prompt.messages[0].content.text == "[t] Hello, Ada!"  # type: ignore[union-attr]
        assert steps == [1, 2]


@pytest.mark.parametrize("repeated", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region"])
async def test_an_mcp_header_sent_twice_is_refused_not_read_by_its_last_copy(
    tmp_path: Path, repeated: str
) -> None:
    """A proxy in front would check one copy and the gateway route on the other (issue #25)."""
    fixture = {"name": "fixture", "command": sys.executable, "args": [str(FIXTURE)]}
    config = with_http(write_config(tmp_path / "g.toml", [fixture]))
    body = modern(1, "tools/call", {"name": "test_custom_header_tool", "arguments": {"region": "eu"}})
    headers = [*standard_headers(body, Mcp_Param_Region="eu").items()]
    first = next(value for name, value in headers if name.lower() == repeated.lower())
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        served = await http.post(url, content=orjson.dumps(body), headers=headers)
        assert served.status_code == 200, served.text  # once each: served
        for twice in ([*headers, (repeated, first)], [*headers, (repeated.upper(), "other")]):
            refused = await http.post(url, content=orjson.dumps(body), headers=twice)
            assert refused.status_code == 400, refused.text
            assert repeated.lower() in refused.json()["error"]["message"]


async def test_a_session_id_sent_twice_is_refused(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        legacy = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        opened = await http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": legacy}, headers=accept
        )
        session_id = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        twice = [*accept.items(), ("mcp-session-id", session_id), ("mcp-session-id", "another")]
        refused = await http.post(url, json=ping, headers=twice)
        assert refused.status_code == 400 and "mcp-session-id" in refused.json()["error"]["message"]
        once = await http.post(url, json=ping, headers={**accept, "mcp-session-id": session_id})
        assert once.status_code == 200
