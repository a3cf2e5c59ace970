"""The Streamable HTTP frontend, driven by the official Python SDK's HTTP client and, where status codes
and SSE events are the point, by raw HTTP requests. The gateway runs in this process with real backend
processes behind it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx2
import jwt
import mcp_types as types
import orjson
import pytest
import trio
from loguru import logger
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from support import (
    DEADLINE_S,
    Notifications,
    backend_entry,
    progress_and_sampling,
    running,
    sse_events,
    with_http,
    write_config,
)
from trio_websocket import ConnectionRejected, open_websocket_url

from actors.gateway import Gateway

ACCEPT_BOTH: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SECRET: Final = "a-test-secret-of-at-least-32-bytes-long"


def initialize(request_id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def call(request_id: int, tool: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def gateway_config(tmp_path: Path, **http: Any) -> Path:
    return with_http(write_config(tmp_path / "g.toml", [backend_entry("t")]), **http)


async def open_session(http: httpx2.AsyncClient, url: str, **headers: str) -> str:
    """initialize + notifications/initialized over raw HTTP; the session id."""
    response = await http.post(url, json=initialize(), headers={**ACCEPT_BOTH, **headers})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    session_id = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    with_id = {**ACCEPT_BOTH, **headers, "mcp-session-id": session_id}
    assert (await http.post(url, json=initialized, headers=with_id)).status_code == 202
    return session_id


async def hang_up_after_first_event(
    http: httpx2.AsyncClient, url: str, message: dict[str, Any]
) -> tuple[dict[str, str], str]:
    """Open a session, POST `message`, read its SSE stream up to the first event with data (the first
    progress), then drop the connection. Returns the session's request headers and that event's id."""
    session_id = await open_session(http, url)
    headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
    with trio.fail_after(DEADLINE_S):
        async with http.stream("POST", url, content=orjson.dumps(message), headers=headers) as response:
            async for event in sse_events(response):
                if event["data"]:
                    return headers, event["id"]
    raise AssertionError("the stream ended before any event with data")


@contextmanager
def captured_log() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    try:
        yield lines
    finally:
        logger.remove(sink)


def http_session(gateway: Gateway) -> Any:
    assert gateway.http_listener is not None
    (session,) = gateway.http_listener.sessions()
    return session


# --- the SDK client --------------------------------------------------------------------------------------


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    reply = types.TextContent(type="text", text="sampled over http")
    return types.CreateMessageResult(role="assistant", content=reply, model="test-model")


async def test_many_sdk_clients_at_once_each_with_its_own_session(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway:
        assert gateway.http_url is not None
        url = gateway.http_url
        answers: dict[int, str] = {}

        async def one_client(number: int) -> None:
            async with Client(streamable_http_client(url), mode="legacy") as client:
                result = await client.call_tool("echo", {"text": f"client {number}"})
                answers[number] = result.content[0].text  # type: ignore[union-attr]

        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                for number in range(12):
                    nursery.start_soon(one_client, number)
        assert answers == {number: f"client {number}" for number in range(12)}


async def test_progress_sampling_logs_and_list_changed_reach_an_sdk_client(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway:
        assert gateway.http_url is not None
        notifications = Notifications()
        logged: list[Any] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logged.append(params.data)

        client_cm = Client(
            streamable_http_client(gateway.http_url),
            mode="legacy",
            sampling_callback=sample,
            logging_callback=on_log,
            message_handler=notifications.handle,
        )
        with trio.fail_after(DEADLINE_S):
            async with client_cm as client:
                await progress_and_sampling(client, "sampled over http")
                await client.call_tool("log", {"data": "a line from the backend"})
                assert logged == ["a line from the backend"]
                await client.call_tool("set_tools", {"extra": ["added"]})
                await notifications.wait_for("notifications/tools/list_changed", 1)  # on the GET stream
                names = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]
                assert "added" in names


# --- streams ---------------------------------------------------------------------------------------------


async def test_a_call_that_reports_progress_is_answered_on_an_sse_stream(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        session_id = await open_session(http, url)
        headers = {**ACCEPT_BOTH, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
        plain = await http.post(url, json=call(2, "echo", {"text": "hi"}), headers=headers)
        assert plain.headers["content-type"].startswith("application/json")
        assert plain.json()["result"]["content"][0]["text"] == "hi"
        with trio.fail_after(DEADLINE_S):
            body = orjson.dumps(call(3, "progress", {"steps": 3}, token="p"))
            async with http.stream("POST", url, content=body, headers=headers) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                events = [event async for event in sse_events(response)]
        priming, *messages = events
        assert priming["data"] == "" and "id" in priming and int(priming["retry"]) > 0
        decoded = [orjson.loads(event["data"]) for event in messages]
        assert [m.get("method") for m in decoded] == ["notifications/progress"] * 3 + [None]
        assert [m["params"]["progressToken"] for m in decoded[:3]] == ["p", "p", "p"]
        assert decoded[-1]["id"] == 3 and decoded[-1]["result"]["content"][0]["text"] == "done 3"
        ids = [event["id"] for event in events]
        assert len(set(ids)) == len(ids)


async def test_a_dropped_stream_resumes_with_last_event_id(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        headers, last_seen = await hang_up_after_first_event(
            http, url, call(2, "progress", {"steps": 3, "delay": 0.2}, token="t")
        )
        with trio.fail_after(DEADLINE_S):
            session = headers["mcp-session-id"]
            resume = {"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": last_seen}
            async with http.stream("GET", url, headers=resume) as resumed:
                assert resumed.status_code == 200
                rest = [orjson.loads(event["data"]) async for event in sse_events(resumed) if event["data"]]
        assert [m["params"]["progress"] for m in rest[:-1]] == [2, 3]
        assert rest[-1]["id"] == 2 and rest[-1]["result"]["content"][0]["text"] == "done 3"


async def test_closing_a_stream_cancels_its_call_at_the_backend(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path, resume_window_s=0)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        # the call is running at the backend when the client hangs up
        headers, _ = await hang_up_after_first_event(
            http, url, call(7, "progress", {"steps": 2, "delay": 60}, token="t")
        )
        with trio.fail_after(DEADLINE_S):
            cancelled: list[Any] = []
            while not cancelled:  # the backend is a separate process: ask it until it has seen the cancel
                answer = await http.post(url, json=call(8, "cancelled_requests", {}), headers=headers)
                cancelled = answer.json()["result"]["structuredContent"]["cancelled"]
                if not cancelled:
                    await trio.sleep(0.05)
        assert len(cancelled) == 1  # the backend's own id for call 7
        still = await http.post(url, json=call(9, "echo", {"text": "on"}), headers=headers)
        assert still.json()["result"]["content"][0]["text"] == "on"  # the session goes on


async def test_a_cancelled_request_ends_its_post_without_an_answer(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        session_id = await open_session(http, url)
        headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
        statuses: list[int] = []
        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:

                async def slow_call() -> None:
                    body = orjson.dumps(call(5, "progress", {"steps": 2, "delay": 60}, token="c"))
                    async with http.stream("POST", url, content=body, headers=headers) as response:
                        async for event in sse_events(response):
                            if event["data"]:  # running at the backend: cancel it
                                cancel = {"requestId": 5, "reason": "the user changed their mind"}
                                notice = {
                                    "jsonrpc": "2.0",
                                    "method": "notifications/cancelled",
                                    "params": cancel,
                                }
                                statuses.append(
                                    (await http.post(url, json=notice, headers=headers)).status_code
                                )
                    statuses.append(response.status_code)  # the stream ended, with no answer on it

                nursery.start_soon(slow_call)
        assert statuses == [202, 200]
        answer = await http.post(url, json=call(6, "cancelled_requests", {}), headers=headers)
        assert len(answer.json()["result"]["structuredContent"]["cancelled"]) == 1


@pytest.mark.parametrize(
    "params", [{"requestId": {"a": 1}}, {"requestId": [1]}, [1], {"requestId": True}, {"requestId": 1.5}]
)
async def test_a_cancel_whose_request_id_is_no_id_is_accepted_and_dropped(
    tmp_path: Path, params: Any
) -> None:
    """Accepted like any notification (202) and dropped by the session with a warning: never a 500."""
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        headers = {**ACCEPT_BOTH, "mcp-session-id": await open_session(http, url)}
        with captured_log() as lines:
            notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
            assert (await http.post(url, json=notice, headers=headers)).status_code == 202
            answer = await http.post(url, json=call(2, "echo", {"text": "still here"}), headers=headers)
        assert answer.json()["result"]["structuredContent"] == {"text": "still here"}
        assert not any("ERROR" in line for line in lines)
        assert any("dropped 'notifications/cancelled' from the client" in line for line in lines)


# --- sessions --------------------------------------------------------------------------------------------


async def test_session_ids_deletion_and_version_checks(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        with captured_log() as log:
            session_id = await open_session(http, url)
            assert len(session_id) >= 32 and all(0x21 <= ord(c) <= 0x7E for c in session_id)
            assert session_id != await open_session(http, url)
            headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
            bad_version = await http.post(
                url,
                json=call(2, "echo", {"text": "x"}),
                headers={**headers, "mcp-protocol-version": "1999-01-01"},
            )
            assert bad_version.status_code == 400 and "1999-01-01" in bad_version.json()["error"]["message"]
            missing = await http.post(url, json=call(2, "echo", {"text": "x"}), headers=ACCEPT_BOTH)
            assert missing.status_code == 400
            unknown = await http.post(
                url, json=call(2, "echo", {"text": "x"}), headers={**ACCEPT_BOTH, "mcp-session-id": "nope"}
            )
            assert unknown.status_code == 404
            session = next(s for s in gateway.http_listener.sessions() if s.id == "http-1")  # type: ignore[union-attr]
            assert (await http.delete(url, headers=headers)).status_code == 204
            with trio.fail_after(DEADLINE_S):
                await session.done.wait()
            after = await http.post(url, json=call(3, "echo", {"text": "x"}), headers=headers)
            assert after.status_code == 404
        assert not any(session_id in line for line in log)


async def test_an_idle_session_expires_and_its_id_is_forgotten(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path, session_idle_s=0.3)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        session_id = await open_session(http, url)
        headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
        with trio.fail_after(DEADLINE_S):
            await http_session(gateway).done.wait()  # closed by the idle timer: no request and no open stream
        expired = await http.post(url, json=call(2, "echo", {"text": "x"}), headers=headers)
        assert expired.status_code == 404
        assert await open_session(http, url) != session_id  # the client initializes again


async def test_an_sdk_client_whose_session_ended_gets_an_error_and_a_new_client_works(tmp_path: Path) -> None:
    async with running(gateway_config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        assert gateway.http_listener is not None
        with trio.fail_after(DEADLINE_S):
            async with Client(streamable_http_client(url), mode="legacy") as client:
                await client.call_tool("echo", {"text": "before"})
                (session_id,) = gateway.http_listener._sessions  # the only one: this client's
                assert (await http.delete(url, headers={"mcp-session-id": session_id})).status_code == 204
                with pytest.raises(MCPError):
                    await client.call_tool("echo", {"text": "after"})  # 404: the session is gone
            async with Client(streamable_http_client(url), mode="legacy") as again:
                result = await again.call_tool("echo", {"text": "new session"})
                assert result.content[0].text == "new session"  # type: ignore[union-attr]


# --- refusals --------------------------------------------------------------------------------------------


async def test_hosts_origins_sizes_and_malformed_bodies_are_refused(tmp_path: Path) -> None:
    config = gateway_config(tmp_path, max_message_bytes=4096, allowed_origins=["https://app.example"])
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        port = url.split(":")[2].split("/")[0]
        rebinding = await http.post(url, json=initialize(), headers={**ACCEPT_BOTH, "host": "evil.example"})
        assert rebinding.status_code == 421
        foreign = await http.post(
            url, json=initialize(), headers={**ACCEPT_BOTH, "origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        for origin in (f"http://localhost:{port}", "https://app.example"):
            allowed = await http.post(url, json=initialize(), headers={**ACCEPT_BOTH, "origin": origin})
            assert allowed.status_code == 200
        session_id = await open_session(http, url)
        headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
        too_big = await http.post(url, json=call(2, "echo", {"text": "x" * 5000}), headers=headers)
        assert too_big.status_code == 413
        broken = await http.post(url, content=b'{"jsonrpc": "2.0", "id": 3,', headers=headers)
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        batch = await http.post(url, json=[call(4, "echo", {"text": "x"})], headers=headers)
        assert batch.status_code == 400
        assert (
            await http.get(url, headers={"mcp-session-id": session_id, "accept": "text/html"})
        ).status_code == 406
        assert (await http.put(url, json={}, headers=headers)).status_code == 405
        assert (
            await http.post(url.replace("/mcp", "/other"), json=initialize(), headers=ACCEPT_BOTH)
        ).status_code == 404
        fine = await http.post(url, json=call(5, "echo", {"text": "still here"}), headers=headers)
        assert fine.json()["result"]["content"][0]["text"] == "still here"


async def test_bearer_tokens_are_checked_on_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_TEST_SECRET", SECRET)
    config = gateway_config(tmp_path, auth={"jwt_secret_env": "HTTP_TEST_SECRET"})
    alice = jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256")
    bob = jwt.encode({"sub": "bob"}, SECRET, algorithm="HS256")
    forged = jwt.encode({"sub": "alice"}, "another-secret-that-is-also-long-enough", algorithm="HS256")
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        with captured_log() as log:
            anonymous = await http.post(url, json=initialize(), headers=ACCEPT_BOTH)
            assert anonymous.status_code == 401 and "bearer" in anonymous.headers["www-authenticate"].lower()
            bad = await http.post(
                url, json=initialize(), headers={**ACCEPT_BOTH, "authorization": f"Bearer {forged}"}
            )
            assert bad.status_code == 401 and "invalid_token" in bad.headers["www-authenticate"]
            session_id = await open_session(http, url, authorization=f"Bearer {alice}")
            as_bob = {**ACCEPT_BOTH, "mcp-session-id": session_id, "authorization": f"Bearer {bob}"}
            assert (
                await http.post(url, json=call(2, "echo", {"text": "x"}), headers=as_bob)
            ).status_code == 404
            authorized = httpx2.AsyncClient(headers={"authorization": f"Bearer {alice}"})
            async with (
                authorized,
                Client(streamable_http_client(url, http_client=authorized), mode="legacy") as client,
            ):
                result = await client.call_tool("echo", {"text": "with a token"})
                assert result.content[0].text == "with a token"  # type: ignore[union-attr]
        assert not any(alice in line or forged in line or session_id in line for line in log)


async def test_shutdown_answers_calls_in_flight_and_ends_open_streams(tmp_path: Path) -> None:
    async with httpx2.AsyncClient() as http:
        async with running(gateway_config(tmp_path)) as gateway:
            url = gateway.http_url
            assert url is not None
            session_id = await open_session(http, url)
            headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
            messages: list[dict[str, Any]] = []
            running_at_backend, reading = trio.Event(), trio.Event()

            async def slow_call() -> None:
                body = orjson.dumps(call(2, "progress", {"steps": 2, "delay": 60}, token="t"))
                async with http.stream("POST", url, content=body, headers=headers) as response:
                    async for event in sse_events(response):
                        if event["data"]:
                            messages.append(orjson.loads(event["data"]))
                            running_at_backend.set()

            async def standalone_stream() -> None:
                get = {"accept": "text/event-stream", "mcp-session-id": session_id}
                async with http.stream("GET", url, headers=get) as response:
                    reading.set()
                    async for _ in sse_events(response):
                        pass  # until the gateway ends the stream

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(slow_call)
                    nursery.start_soon(standalone_stream)
                    await reading.wait()
                    await running_at_backend.wait()
                    gateway.stop()
        progress, answer = messages
        assert progress["method"] == "notifications/progress"
        assert answer["id"] == 2 and "error" in answer


async def test_a_websocket_upgrade_at_the_http_listener_is_refused_with_403_and_one_log_line(
    tmp_path: Path,
) -> None:
    config = with_http(write_config(tmp_path / "g.toml", [backend_entry("a", "--only=echo")]))
    async with running(config) as gateway:
        assert gateway.http_url is not None
        with captured_log() as lines, pytest.raises(ConnectionRejected) as refused:
            async with open_websocket_url(gateway.http_url.replace("http://", "ws://"), subprotocols=["mcp"]):
                pass
        assert refused.value.status_code == 403
        assert len([line for line in lines if "refused a WebSocket upgrade" in line]) == 1
        assert not any("ASGI" in line or "Traceback" in line for line in lines)
