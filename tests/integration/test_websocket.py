"""The WebSocket frontend over real loopback connections: a real gateway (in this process, so the tests can
see its sessions) in front of real backend processes, and trio-websocket clients."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from loguru import logger
from support import (
    DEADLINE_S,
    backend_entry,
    connect,
    fast_restarts,
    running,
    with_websocket,
    write_config,
)
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
)

from actors.config import load_config
from actors.gateway import Gateway

SECRET = "test-secret-that-is-long-enough-for-hs256"


def token(**claims: Any) -> list[tuple[bytes, bytes]]:
    encoded = jwt.encode({"sub": "alice", "exp": int(time.time()) + 600, **claims}, claims.pop("key", SECRET))
    return [(b"authorization", f"Bearer {encoded}".encode())]


async def test_two_hundred_sessions_with_colliding_ids_each_get_their_own_answers(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(
            tmp_path / "g.toml", [backend_entry("alpha", "--only=echo"), backend_entry("beta", "--only=add")]
        ),
        max_sessions_per_client=200,  # all from one address
    )
    results: dict[int, tuple[object, object]] = {}
    async with running(config) as gateway:
        assert gateway.websocket_url is not None

        async def one_session(n: int) -> None:
            async with connect(gateway.websocket_url, initialize=False) as client:  # type: ignore[arg-type]
                assert client.connection.subprotocol == "mcp"
                await client.initialize()
                await client.call(1, "echo", text=f"session {n}")  # every session uses ids 1 and 2
                await client.call(2, "add", a=n, b=1000)
                answers = {}
                for _ in range(2):
                    message = await client.receive()
                    answers[message["id"]] = message["result"]["structuredContent"]
                results[n] = (answers[1], answers[2])

        async with trio.open_nursery() as nursery:
            for n in range(200):
                nursery.start_soon(one_session, n)
    assert results == {n: ({"text": f"session {n}"}, {"sum": n + 1000}) for n in range(200)}


async def test_a_session_killed_mid_call_is_cancelled_at_the_backend_and_others_go_on(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=progress,echo,cancelled_requests")])
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with connect(url) as survivor:
            async with connect(url) as doomed:
                await doomed.request(
                    1,
                    "tools/call",
                    {
                        "name": "progress",
                        "arguments": {"steps": 10_000, "delay": 0.05},
                        "_meta": {"progressToken": 1},
                    },
                )
                assert (await doomed.receive())[
                    "method"
                ] == "notifications/progress"  # running at the backend
                (doomed_session,) = [s for s in gateway.listener.sessions() if s.id == "ws-2"]  # type: ignore[union-attr]
                await doomed.connection._stream.aclose()  # the client vanishes: no close handshake
            with trio.fail_after(DEADLINE_S):
                await doomed_session.done.wait()
            await survivor.call(7, "cancelled_requests")
            cancelled = (await survivor.answer_to(7))["result"]["structuredContent"]["cancelled"]
            assert len(cancelled) == 1
            await survivor.call(8, "echo", text="still here")
            assert (await survivor.answer_to(8))["result"]["structuredContent"] == {"text": "still here"}


async def test_list_changed_reaches_every_session_and_progress_only_its_own(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,set_tools,progress")])
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with connect(url) as first, connect(url) as second, connect(url) as third:
            params = {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "same"}}
            await first.request(1, "tools/call", params)
            await second.request(1, "tools/call", params)
            for client in (first, second):
                got = [
                    await client.receive() for _ in range(4)
                ]  # three progress notifications, then the result
                assert [m["params"]["progress"] for m in got[:3]] == [1, 2, 3]
                assert all(m["params"]["progressToken"] == "same" for m in got[:3])
                assert got[3]["id"] == 1 and "result" in got[3]
            await first.call(2, "set_tools", extra=["fresh"])
            await first.answer_to(2)
            for client in (first, second, third):
                assert await client.receive() == {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                }


async def test_auth_accepts_a_valid_token_and_refuses_every_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_JWT_SECRET", SECRET)
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]),
        auth={"jwt_secret_env": "GATEWAY_JWT_SECRET", "audience": "mcp-gateway"},
    )
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(f"{m.record['extra']} {m}"), level="DEBUG")
    good = token(aud="mcp-gateway")
    bad = {
        "none": [],
        "not bearer": [(b"authorization", b"Basic YWxhZGRpbjpvcGVuc2VzYW1l")],
        "expired": token(aud="mcp-gateway", exp=int(time.time()) - 60),
        "wrong signature": token(aud="mcp-gateway", key="another-secret-that-is-long-enough-too"),
        "wrong audience": token(aud="someone-else"),
    }
    try:
        async with running(config) as gateway:
            url = gateway.websocket_url
            assert url is not None
            async with connect(url, extra_headers=good) as client:
                await client.call(1, "echo", text="authenticated")
                assert (await client.answer_to(1))["result"]["structuredContent"] == {"text": "authenticated"}
            for case, headers in bad.items():
                with pytest.raises(ConnectionRejected) as refused:
                    async with connect(url, extra_headers=headers, initialize=False):
                        pass
                assert refused.value.status_code == 401, case
    finally:
        logger.remove(sink)
    assert any("'subject': 'alice'" in line and "connected from" in line for line in lines)
    tokens = [
        value.decode().split()[1]
        for headers in [good, *bad.values()]
        for _, value in headers
        if b"Bearer" in value
    ]
    assert not any(t in line for t in tokens for line in lines)  # tokens never reach the log


async def test_handshake_refusals_path_origin_and_session_limit(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]),
        allowed_origins=["https://app.example"],
        max_sessions=2,
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        with pytest.raises(ConnectionRejected) as wrong_path:
            async with connect(url.replace("/mcp", "/other"), initialize=False):
                pass
        assert wrong_path.value.status_code == 404
        with pytest.raises(ConnectionRejected) as wrong_origin:
            async with connect(url, extra_headers=[(b"origin", b"https://evil.example")], initialize=False):
                pass
        assert wrong_origin.value.status_code == 403
        async with (
            connect(url, extra_headers=[(b"origin", b"https://app.example")]),
            connect(url),
        ):  # two: the limit
            with pytest.raises(ConnectionRejected) as full:
                async with connect(url, initialize=False):
                    pass
            assert full.value.status_code == 503
        async with connect(url) as after:  # room again once they have gone
            await after.call(1, "echo", text="x")
            assert "result" in await after.answer_to(1)


async def test_oversized_and_binary_frames_close_with_their_codes(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]), max_message_bytes=4096
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        for frame, code in (("x" * 10_000, 1009), (b"\x00binary", 1003)):
            async with connect(url) as client:
                await client.connection.send_message(frame)
                with pytest.raises(ConnectionClosed) as closed:
                    await client.receive()
                assert closed.value.reason.code == code


async def test_a_client_that_stops_reading_is_closed_without_slowing_others(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]), send_timeout_s=0.5
    )
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(f"{m.record['extra']} {m}"), level="INFO")
    big = "y" * 400_000
    try:
        async with running(config) as gateway:
            url = gateway.websocket_url
            assert url is not None and gateway.listener is not None
            async with connect(url) as reader, connect(url) as sluggard:
                (stalled,) = [s for s in gateway.listener.sessions() if s.id == "ws-2"]
                for n in range(30):  # some 24 MB of answers that it never reads
                    await sluggard.call(n, "echo", text=big)
                for n in range(10):
                    await reader.call(n, "echo", text=f"quick {n}")
                    assert (await reader.answer_to(n))["result"]["structuredContent"] == {
                        "text": f"quick {n}"
                    }
                with trio.fail_after(DEADLINE_S):
                    await stalled.done.wait()  # the gateway gave up on it
                await reader.call("after", "echo", text="still quick")
                assert "result" in await reader.answer_to("after")
    finally:
        logger.remove(sink)
    # It took nothing at all: the frame in flight could not be finished, so no 1008 could follow it.
    assert any("'session': 'ws-2'" in line and "the client read nothing for 0.5s" in line for line in lines)


async def test_a_peer_that_never_answers_pings_is_closed_and_a_live_one_is_kept(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")]), ping_interval_s=0.2
    )
    async with running(config) as gateway, connect(gateway.websocket_url or "") as live:
        assert gateway.listener is not None
        port = int((gateway.websocket_url or "").split(":")[2].split("/")[0])
        with trio.fail_after(DEADLINE_S):
            mute = await trio.open_tcp_stream("127.0.0.1", port)  # a WebSocket peer that never pongs
            await mute.send_all(
                b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            )
            received = b""
            while chunk := await mute.receive_some():  # pings arrive, no pong goes back, then the close
                received += chunk
            await mute.aclose()
        assert received.startswith(b"HTTP/1.1 101")
        assert b"\x03\xf3" in received  # the close frame's code: 1011
        await live.call("still", "echo", text="here")  # trio-websocket answers pings: this one stays
        assert "result" in await live.answer_to("still")


async def test_shutdown_answers_every_call_and_closes_with_1001(tmp_path: Path) -> None:
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=sleep")], shutdown_s=2)
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with connect(url) as first, connect(url) as second:
            for client in (first, second):
                for n in range(20):
                    await client.call(n, "sleep", seconds=600)
                await client.request("probe", "ping")  # answered once the calls before it are in flight
                await client.answer_to("probe")
            started = trio.current_time()
            gateway.stop()  # what SIGTERM does
            for client in (first, second):
                answered = set()
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        message = await client.receive()
                        assert message["error"]["code"] == -32000 and message["id"] not in answered
                        answered.add(message["id"])
                assert answered == set(range(20))
                assert closed.value.reason.code == 1001
            assert trio.current_time() - started < 2


async def test_a_websocket_backend_is_reconnected_after_it_goes_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway in front of another gateway over ws://, with a bearer token from the environment."""
    monkeypatch.setenv("GATEWAY_JWT_SECRET", SECRET)
    monkeypatch.setenv("INNER_AUTHORIZATION", token()[0][1].decode())
    auth = {"jwt_secret_env": "GATEWAY_JWT_SECRET"}
    inner_config = with_websocket(
        write_config(tmp_path / "inner.toml", [backend_entry("alpha", "--only=echo,pid")]), auth=auth
    )
    async with trio.open_nursery() as inner_nursery:
        inner, inner_stopped = Gateway(load_config(inner_config)), trio.Event()

        async def run_inner(task_status: trio.TaskStatus[object]) -> None:
            await inner.run(task_status=task_status)
            inner_stopped.set()

        await inner_nursery.start(run_inner)
        inner_url = inner.websocket_url
        assert inner_url is not None
        remote = {
            "name": "remote",
            "url": inner_url,
            "headers_env": {"Authorization": "INNER_AUTHORIZATION"},
            "restart": {"backoff_initial_s": 0.05, "backoff_max_s": 0.2, "max_restarts": 50},
        }
        outer_config = with_websocket(
            write_config(tmp_path / "outer.toml", [remote, backend_entry("local", "--only=add")])
        )
        async with running(outer_config) as outer:
            assert outer.websocket_url is not None
            async with connect(outer.websocket_url) as client:
                await client.request(1, "tools/list")
                assert sorted(t["name"] for t in (await client.answer_to(1))["result"]["tools"]) == [
                    "add",
                    "echo",
                    "pid",
                ]
                await client.call(2, "echo", text="through two gateways")
                assert (await client.answer_to(2))["result"]["structuredContent"] == {
                    "text": "through two gateways"
                }

                inner.stop()  # the remote backend goes away
                with trio.fail_after(DEADLINE_S):
                    await inner_stopped.wait()
                assert await client.receive() == {
                    "jsonrpc": "2.0",
                    "method": "notifications/tools/list_changed",
                }
                await client.call(3, "echo", text="anyone?")
                down = await client.answer_to(3)
                assert down["error"]["code"] == -32000 and "remote" in down["error"]["message"]
                await client.call(4, "add", a=1, b=1)
                assert (await client.answer_to(4))["result"]["structuredContent"] == {"sum": 2}

                port = inner_url.rsplit(":", 1)[1].split("/")[0]
                again = with_websocket(
                    write_config(tmp_path / "again.toml", [backend_entry("alpha", "--only=echo,pid")]),
                    auth=auth,
                )
                again.write_text(again.read_text().replace("port = 0", f"port = {port}"))
                async with running(again):
                    assert await client.receive() == {
                        "jsonrpc": "2.0",
                        "method": "notifications/tools/list_changed",
                    }
                    await client.call(5, "echo", text="back")
                    assert (await client.answer_to(5))["result"]["structuredContent"] == {"text": "back"}


def test_rs256_and_es256_tokens_are_checked_against_the_public_key() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from actors.config import JwtAuth
    from actors.identity.principal import Principal
    from actors.identity.verifier import verify_static
    from actors.identity.verify import TokenRefusedError

    for private, algorithm in (
        (rsa.generate_private_key(65537, 2048), "RS256"),
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
    ):
        public = (
            private.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
        auth = JwtAuth(
            key=public, algorithms=("RS256", "ES256"), audience="mcp-gateway", issuer="https://issuer.example"
        )
        claims = {
            "sub": "bob",
            "aud": "mcp-gateway",
            "iss": "https://issuer.example",
            "exp": int(time.time()) + 60,
        }
        good = jwt.encode(claims, private, algorithm=algorithm)
        assert verify_static(good, auth) == Principal("https://issuer.example", "bob")
        for bad in (
            jwt.encode({**claims, "iss": "https://elsewhere.example"}, private, algorithm=algorithm),
            jwt.encode(claims, SECRET, algorithm="HS256"),  # HS256 is not an allowed algorithm here
        ):
            with pytest.raises(TokenRefusedError):
                verify_static(bad, auth)


async def test_resource_updates_reach_only_the_sessions_that_subscribed(tmp_path: Path) -> None:
    backends = [
        backend_entry("alpha", "--only=echo", "--resources"),
        backend_entry("beta", "--only=add", "--resources"),
    ]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    shared = "beta+test://shared"
    update = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": shared}}
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with connect(url) as watcher, connect(url) as bystander:

            async def touch(request_id: int, tool: str = "beta__touch") -> bool:
                await bystander.call(
                    request_id, tool, uri="test://shared"
                )  # beta's own URI, as beta knows it
                return (await bystander.answer_to(request_id))["result"]["structuredContent"]["notified"]

            async with connect(url) as second:
                for client in (watcher, second):
                    await client.request(1, "resources/subscribe", {"uri": shared})
                    assert (await client.answer_to(1))["result"] == {}
                assert await touch(2)
                assert await watcher.receive() == update
                assert await second.receive() == update
                await watcher.request(3, "resources/unsubscribe", {"uri": shared})
                assert (await watcher.answer_to(3))["result"] == {}
                assert await touch(4)  # `second` still wants it: beta stays subscribed
                assert await second.receive() == update
                assert not await touch(5, "touch")  # alpha's URI of that name: nobody subscribed
            # `second` has gone: nobody wants the updates, so the gateway unsubscribes at beta.
            with trio.fail_after(DEADLINE_S):
                request_id = 6
                while await touch(request_id):
                    request_id += 1
            await watcher.request(99, "ping")
            assert await watcher.receive() == {
                "jsonrpc": "2.0",
                "id": 99,
                "result": {},
            }  # no update came first


async def test_subscriptions_are_renewed_when_the_backend_restarts(tmp_path: Path) -> None:
    entry = backend_entry("alpha", "--only=crash", "--resources", restart=fast_restarts())
    config = with_websocket(write_config(tmp_path / "g.toml", [entry]))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with connect(gateway.websocket_url) as client:
            await client.request(1, "resources/subscribe", {"uri": "test://shared"})
            assert (await client.answer_to(1))["result"] == {}
            await client.call(2, "crash")
            assert "error" in await client.answer_to(2)
            with trio.fail_after(DEADLINE_S):  # the tools leave, then come back with the new process
                while (await client.receive()).get("method") != "notifications/tools/list_changed":
                    pass
                while True:
                    await client.call(3, "touch", uri="test://shared")
                    answer = await client.answer_to(3)
                    if "result" in answer:
                        break
            assert answer["result"]["structuredContent"] == {"notified": True}


async def test_a_session_ends_when_its_token_expires_and_its_call_in_flight_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_JWT_SECRET", SECRET)
    config = with_websocket(
        write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,sleep")]),
        auth={"jwt_secret_env": "GATEWAY_JWT_SECRET"},
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        with trio.fail_after(DEADLINE_S):
            async with connect(url, extra_headers=token(exp=int(time.time()) + 600)) as lasting:
                async with connect(url, extra_headers=token(exp=int(time.time()) + 2)) as expiring:
                    await expiring.call(1, "sleep", seconds=3)  # in flight when the token expires (1-2 s)
                    await expiring.call(2, "echo", text="before")
                    assert (await expiring.answer_to(2))["result"]["structuredContent"] == {"text": "before"}
                    assert "result" in await expiring.answer_to(1)  # answered, though the token ran out
                    with pytest.raises(ConnectionClosed) as closed:
                        while True:  # nothing more: the gateway closes it once the token has expired
                            await expiring.connection.get_message()
                    assert closed.value.reason.code == 1008
                    assert closed.value.reason.reason == "the access token has expired"
                await lasting.call(3, "echo", text="still here")  # a token good for longer: served
                assert (await lasting.answer_to(3))["result"]["structuredContent"] == {"text": "still here"}
