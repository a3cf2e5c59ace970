"""The network listeners as a long-running service meets them: a port already taken, one client opening
session after session, slow bodies, cancelled calls, a listener whose socket fails, no file descriptors."""

from __future__ import annotations

import errno
import math
import socket
import sys
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
import trio
import trio.testing
from loguru import logger
from support import (
    DEADLINE_S,
    ROOT,
    backend_entry,
    running,
    started_pids,
    with_http,
    with_websocket,
    write_config,
)
from test_hostile_connections import ACCEPT_BOTH, INITIALIZE, port_of, still_serves, ws_echo
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from actors.cli import main
from actors.frontends.admission import RETRY_AFTER_S
from actors.frontends.listening import Acceptor


def config_with(tmp_path: Path, websocket: dict[str, Any] | None = None, **http: Any) -> Path:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,sleep")])
    return with_http(with_websocket(config, **(websocket or {})), **http)


async def test_a_port_in_use_is_one_line_and_exit_2_before_any_backend_starts(tmp_path: Path) -> None:
    state = tmp_path / "starts"
    config = write_config(
        tmp_path / "g.toml", [backend_entry("alpha", "--only=echo", f"--state-file={state}")]
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config.write_text(config.read_text() + f"\n[websocket]\nport = {port}\n")
        result = await trio.run_process(
            [sys.executable, "-m", "actors", "serve", "--config", str(config)],
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 2
    # The whole of stderr: no "serving MCP" line before it, no traceback after it.
    assert result.stderr.decode() == f"mcp-gateway: cannot listen on 127.0.0.1:{port}: address in use\n"
    assert started_pids(state) == []  # no backend was started for nothing


async def test_one_client_gets_at_most_its_share_of_sessions_on_each_listener(tmp_path: Path) -> None:
    async with running(
        config_with(tmp_path, {"max_sessions_per_client": 2}, max_sessions_per_client=2)
    ) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        async with open_websocket_url(gateway.websocket_url), open_websocket_url(gateway.websocket_url):
            with pytest.raises(ConnectionRejected) as rejected:
                async with open_websocket_url(gateway.websocket_url):
                    pass
            assert rejected.value.status_code == 429
            assert (b"retry-after", str(RETRY_AFTER_S).encode()) in rejected.value.headers
        # Both closed: the client's share is back.
        assert await ws_echo(gateway.websocket_url, "again") == "again"

        async with httpx2.AsyncClient() as http:
            opened = [
                await http.post(gateway.http_url, json=INITIALIZE, headers=ACCEPT_BOTH) for _ in range(3)
            ]
            # none is busy: the third ended the least recently active one to make room (test_http_session_cap)
            assert [answer.status_code for answer in opened] == [200, 200, 200]
            session_id = opened[1].headers["mcp-session-id"]
            assert (
                await http.delete(gateway.http_url, headers={"mcp-session-id": session_id})
            ).status_code == 204
            again = await http.post(gateway.http_url, json=INITIALIZE, headers=ACCEPT_BOTH)
            assert again.status_code == 200
            assert len(gateway.http_listener._sessions) == 2  # type: ignore[union-attr]


async def test_a_body_that_does_not_arrive_in_time_gets_408(tmp_path: Path) -> None:
    async with running(config_with(tmp_path, body_timeout_s=0.5)) as gateway:
        stream = await trio.open_tcp_stream("127.0.0.1", port_of(gateway.http_url))
        head = (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc"'
        )
        await stream.send_all(head)
        with trio.fail_after(DEADLINE_S):
            answer = await stream.receive_some(65536)
        assert answer.startswith(b"HTTP/1.1 408")
        await stream.aclose()


async def test_a_cancelled_call_that_produced_nothing_ends_as_an_empty_event_stream(tmp_path: Path) -> None:
    async with running(config_with(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url, listener = gateway.http_url, gateway.http_listener
        assert url is not None and listener is not None
        opened = await http.post(url, json=INITIALIZE, headers=ACCEPT_BOTH)
        headers = {**ACCEPT_BOTH, "mcp-session-id": opened.headers["mcp-session-id"]}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        (entry,) = listener._sessions.values()
        answers: list[httpx2.Response] = []
        async with trio.open_nursery() as nursery:

            async def slow_call() -> None:
                call = {"name": "sleep", "arguments": {"seconds": 60}}
                body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
                answers.append(await http.post(url, json=body, headers=headers))

            nursery.start_soon(slow_call)
            with trio.fail_after(DEADLINE_S):
                while not entry.transport._requests:  # noqa: ASYNC110 (the call is in the session: no event)
                    await trio.sleep(0.01)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
        (answer,) = answers
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/event-stream"
        assert b'"id"' not in answer.content  # no response on it: the client cancelled


async def test_max_inflight_per_session_from_the_config_bounds_each_network_session(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "g.toml", [backend_entry("alpha", "--only=echo,sleep")], max_inflight_per_session=2
    )
    async with running(with_websocket(config)) as gateway:
        assert gateway.websocket_url is not None
        async with open_websocket_url(gateway.websocket_url, subprotocols=["mcp"]) as client:
            await client.send_message(orjson.dumps(INITIALIZE).decode())
            assert "result" in orjson.loads(await client.get_message())
            await client.send_message('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            sleep = {"name": "sleep", "arguments": {"seconds": 60}}
            for n in (2, 3, 4):  # two held by the backend; the third is one too many
                call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": sleep}
                await client.send_message(orjson.dumps(call).decode())
            with trio.fail_after(DEADLINE_S):
                refused = orjson.loads(await client.get_message())
            assert refused["id"] == 4 and refused["error"]["code"] == -32000
            assert refused["error"]["data"] == {"max_inflight": 2}
            await client.send_message('{"jsonrpc": "2.0", "id": 5, "method": "ping"}')
            with trio.fail_after(DEADLINE_S):
                assert orjson.loads(await client.get_message()) == {"jsonrpc": "2.0", "id": 5, "result": {}}


async def test_a_listener_that_loses_its_socket_is_restarted_and_its_sessions_go_on(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")])
    config.write_text(config.read_text() + f"\n[websocket]\nport = {port}\n")
    config = with_http(config)
    async with running(config) as gateway:
        assert gateway.listener is not None and gateway.websocket_url is not None
        async with open_websocket_url(gateway.websocket_url, subprotocols=["mcp"]) as bystander:
            await bystander.send_message(orjson.dumps(INITIALIZE).decode())
            assert "result" in orjson.loads(await bystander.get_message())
            lines: list[str] = []
            listening_again = trio.Event()

            def watch(message: Any) -> None:
                lines.append(str(message))
                if "listening on ws://" in str(message):
                    listening_again.set()

            sink = logger.add(watch, level="INFO")
            try:
                for listening in gateway.listener.endpoint.sockets or ():
                    listening.socket.close()  # the accept loop fails; the supervisor restarts the run
                with trio.fail_after(DEADLINE_S):
                    await listening_again.wait()
            finally:
                logger.remove(sink)
            assert any("restarting in" in line for line in lines)
            await bystander.send_message('{"jsonrpc": "2.0", "id": 2, "method": "ping"}')
            assert orjson.loads(await bystander.get_message()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert gateway.websocket_url == f"ws://127.0.0.1:{port}/mcp"
        assert gateway.http_url is not None
        await still_serves(gateway.websocket_url, gateway.http_url)


class Exhausted:
    """A listening socket of a process that has no file descriptor left."""

    def __init__(self) -> None:
        self.attempts = 0

    async def accept(self) -> trio.SocketStream:
        self.attempts += 1
        await trio.lowlevel.checkpoint()
        raise OSError(errno.EMFILE, "Too many open files")


async def test_running_out_of_file_descriptors_is_logged_once_a_second(
    autojump_clock: trio.testing.MockClock,
) -> None:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    listener = Exhausted()
    try:
        async with trio.open_nursery() as nursery:
            acceptor = Acceptor("test", trio.aclose_forcefully)
            nursery.start_soon(acceptor.run, [listener], nursery)
            await trio.sleep(10.0)
            nursery.cancel_scope.cancel()
    finally:
        logger.remove(sink)
    assert listener.attempts >= 90  # it kept trying, every 0.1 s
    logged = [line for line in lines if "cannot accept" in line]
    assert 9 <= len(logged) <= 11 and "Traceback" not in "".join(lines)
    assert "more not logged" in logged[-1]


class BrokenStdio:
    """A stdin that fails in a way nobody planned for: the stdio session crashes on its first read."""

    async def receive(self) -> bytes | None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("stdin broke")

    async def send(self, frame: bytes) -> None:
        await trio.lowlevel.checkpoint()

    def send_nowait(self, frames: Any) -> bool:
        return False  # every frame through send_many

    async def send_many(self, frames: Any) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def test_a_crashed_stdio_session_never_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")])
    monkeypatch.setattr("actors.gateway.open_stdio_transport", lambda max_bytes: BrokenStdio())
    assert main(["serve", "--stdio", "--config", str(config)]) == 1


async def test_a_session_that_does_not_finish_initialize_in_time_is_closed(tmp_path: Path) -> None:
    quick = {"initialize_timeout_s": 0.5}
    async with running(config_with(tmp_path, quick, **quick)) as gateway, httpx2.AsyncClient() as http:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        async with open_websocket_url(gateway.websocket_url, subprotocols=["mcp"]) as silent:
            with trio.fail_after(DEADLINE_S), pytest.raises(ConnectionClosed):
                await silent.get_message()  # it never initialized: the gateway closes it

        opened = await http.post(gateway.http_url, json=INITIALIZE, headers=ACCEPT_BOTH)
        (half_done,) = gateway.http_listener.sessions()  # type: ignore[union-attr]
        with trio.fail_after(DEADLINE_S):
            await half_done.done.wait()  # initialize answered, but notifications/initialized never came
        headers = {**ACCEPT_BOTH, "mcp-session-id": opened.headers["mcp-session-id"]}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(gateway.http_url, json=ping, headers=headers)).status_code == 404

        # A client that finishes initialize keeps its session past the deadline.
        async with open_websocket_url(gateway.websocket_url, subprotocols=["mcp"]) as client:
            await client.send_message(orjson.dumps(INITIALIZE).decode())
            assert "result" in orjson.loads(await client.get_message())
            await client.send_message('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            await client.send_message('{"jsonrpc": "2.0", "id": 3, "method": "ping"}')
            assert orjson.loads(await client.get_message())["id"] == 3
            (session,) = gateway.listener.sessions()  # type: ignore[union-attr]
            assert session._reader_scope.deadline == math.inf


async def test_a_backend_hung_at_start_holds_the_first_initialize_only_initialize_hold_s(
    tmp_path: Path,
) -> None:
    hung = backend_entry("hung", "--hang-on-initialize", startup_timeout_s=60)
    config = with_websocket(
        write_config(
            tmp_path / "g.toml", [backend_entry("alpha", "--only=echo"), hung], initialize_hold_s=3.0
        )
    )
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="WARNING")
    try:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            with trio.fail_after(10.0):  # far below the hung backend's 60 s start
                assert await ws_echo(gateway.websocket_url, "ready ones serve") == "ready ones serve"
    finally:
        logger.remove(sink)
    held = [line for line in lines if "answering with what is ready" in line]
    assert len(held) == 1 and held[0].rstrip().endswith("without hung (starting)")
