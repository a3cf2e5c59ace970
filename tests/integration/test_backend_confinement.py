"""What a backend is given, and what leaks from it: its environment (the SDKs' default set, its inherit_env
and env, never a listener's secret), its roots (by its `roots` key, never one client's roots for everyone),
and its stderr (in the log and in `mcp-gateway tools`, not in clients' errors unless the operator says so).
Real gateways in this process, real backend processes, real SDK clients over WebSockets."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import jwt
import mcp_types as types
import pytest
import trio
from loguru import logger
from mcp import Client
from mcp.shared.exceptions import MCPError
from sdk_websocket import websocket_client
from support import DEADLINE_S, backend_entry, running, with_websocket, write_config

from actors.backends.errors import BackendExitedError
from actors.catalog import PREFIX_ON_COLLISION, Catalog, CatalogEvent
from actors.runtime.supervisor import ChildFailed

SECRET: Final = "backend-confinement-secret-long-enough-for-hs256"
SECRET_ENV: Final = "CONFINEMENT_JWT_SECRET"


@attrs.define
class Log:
    lines: list[str] = attrs.field(factory=list)
    _grew: trio.Event = attrs.field(factory=trio.Event)

    def add(self, message: Any) -> None:
        self.lines.append(str(message))
        self._grew.set()
        self._grew = trio.Event()

    async def wait_for(self, text: str) -> None:
        with trio.fail_after(DEADLINE_S):
            while not any(text in line for line in self.lines):
                await self._grew.wait()

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)


@contextmanager
def captured_log(level: str = "INFO") -> Iterator[Log]:
    log = Log()
    sink = logger.add(log.add, level=level, format="{level} {message}")
    try:
        yield log
    finally:
        logger.remove(sink)


def bearer() -> list[tuple[str, str]]:
    token = jwt.encode({"sub": "alice", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    return [("authorization", f"Bearer {token}")]


async def environment_of(client: Client, tool: str = "environment") -> dict[str, str]:
    result = await client.call_tool(tool, {})
    assert not result.is_error, result
    return result.structured_content["env"]  # type: ignore[index,no-any-return]


# --- environment -----------------------------------------------------------------------------------------


async def test_a_backend_sees_the_default_set_its_inherit_env_and_env_never_other_variables_or_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv("CLOUD_PROVIDER_KEY", "do-not-leak")
    monkeypatch.setenv("WANTED_BY_ALPHA", "wanted")
    monkeypatch.setenv("HOME", "/home/gateway")
    entry = backend_entry(
        "alpha",
        "--only=environment",
        inherit_env=["WANTED_BY_ALPHA", SECRET_ENV, "NOT_SET_ANYWHERE"],
        env={"SET_FOR_ALPHA": "set"},
    )
    config = with_websocket(write_config(tmp_path / "g.toml", [entry]), auth={"jwt_secret_env": SECRET_ENV})
    with captured_log("WARNING") as log:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url, headers=bearer()) as client:
                env = await environment_of(client)
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == "/home/gateway"
    assert env["WANTED_BY_ALPHA"] == "wanted" and env["SET_FOR_ALPHA"] == "set"
    assert "CLOUD_PROVIDER_KEY" not in env and "NOT_SET_ANYWHERE" not in env
    assert SECRET_ENV not in env and SECRET not in env.values()
    given = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "WANTED_BY_ALPHA", "SET_FOR_ALPHA"}
    assert set(env) - given <= {"LC_CTYPE"}  # Python's own locale coercion (PEP 538) in the backend
    warnings = [line for line in log if SECRET_ENV in line]
    assert len(warnings) == 1 and "not passed on" in warnings[0]


# --- roots -----------------------------------------------------------------------------------------------


def roots_backend(name: str, **settings: Any) -> dict[str, Any]:
    return backend_entry(name, "--only=ask_client,client_view", "--roots-on-start", **settings)


async def tool(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await client.call_tool(name, arguments or {})
    assert not result.is_error, result
    return result.structured_content


async def test_roots_none_and_fixed_roots_never_reach_a_client_nor_take_its_roots(tmp_path: Path) -> None:
    backends = [
        roots_backend("confined", roots=["file:///srv/project", "file:///srv/shared%20docs/"]),
        roots_backend("rootless", roots="none"),
        roots_backend("unset"),  # with a network listener, "none"
    ]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    asked: list[str] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        asked.append("roots/list")
        return types.ListRootsResult(roots=[types.Root(uri="file:///etc")])  # type: ignore[arg-type]

    with captured_log("DEBUG") as log:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url, list_roots_callback=list_roots) as client:
                answer = await tool(client, "ask_client", {"method": "roots/list"})
                assert answer["result"]["roots"] == [
                    {"uri": "file:///srv/project", "name": "project"},
                    {"uri": "file:///srv/shared%20docs/", "name": "shared docs"},
                ]
                for prefix in ("rootless__", "unset__"):
                    answer = await tool(client, f"{prefix}ask_client", {"method": "roots/list"})
                    assert answer["error"]["code"] == -32601
                    assert "offers no roots" in answer["error"]["message"]
                await client.send_roots_list_changed()
                views = {
                    prefix: await tool(client, f"{prefix}client_view")
                    for prefix in ("", "rootless__", "unset__")
                }
    assert views[""]["capabilities"]["roots"] == {"listChanged": False}
    assert (
        "roots" not in views["rootless__"]["capabilities"] and "roots" not in views["unset__"]["capabilities"]
    )
    for view in views.values():  # the client's roots/list_changed reached none of them
        assert "notifications/roots/list_changed" not in view["notifications"]
    assert asked == []
    assert not [line for line in log if "roots/list" in line and line.startswith(("WARNING", "ERROR"))]


async def test_client_roots_before_any_session_are_no_warning_and_the_first_session_alone_is_asked(
    tmp_path: Path,
) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [roots_backend("alpha", roots="client")]))
    logged: list[Any] = []
    got = trio.Event()

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/alice/project")])  # type: ignore[arg-type]

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        # The backend logs each roots/list outcome; its log of the refusal at start-up may reach the session
        # too when the machine is slow, so the answer this session gave is the one with a result.
        if isinstance(params.data, dict) and "result" in params.data:
            logged.append(params.data)
            got.set()

    with captured_log() as log:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            await log.wait_for("refused its roots/list")  # the backend asked at start-up, before any session
            async with websocket_client(
                gateway.websocket_url, list_roots_callback=list_roots, logging_callback=on_log
            ) as client:
                with trio.fail_after(DEADLINE_S):
                    await got.wait()  # told of the session that joined, it asked again
                assert logged[0]["result"]["roots"] == [{"uri": "file:///home/alice/project"}]
                assert (await tool(client, "client_view"))["capabilities"]["roots"] == {"listChanged": True}
    refused = [line for line in log if "refused its roots/list" in line]
    assert refused and all(line.startswith("INFO") for line in refused)


# --- stderr ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expose", [False, True])
async def test_a_backends_stderr_is_in_the_log_but_not_in_clients_errors(
    tmp_path: Path, expose: bool
) -> None:
    """Unless [gateway] expose_backend_stderr: then a call to the backend left down is told its stderr."""
    entry = backend_entry("alpha", "--only=echo,crash", restart={"max_restarts": 0})
    config = with_websocket(write_config(tmp_path / "g.toml", [entry], expose_backend_stderr=expose))
    with captured_log() as log:
        async with running(config) as gateway:
            assert gateway.websocket_url is not None
            async with websocket_client(gateway.websocket_url) as client:
                with pytest.raises(MCPError) as crashed:
                    await client.call_tool("crash", {"code": 7})
                await log.wait_for("left down")
                with pytest.raises(MCPError) as down:
                    await client.call_tool("echo", {"text": "anyone?"})
    errors = [f"{error.value} {error.value.error.data}" for error in (crashed, down)]
    assert "belongs to backend 'alpha', which is failed" in errors[1] and "exited with code 7" in errors[1]
    if expose:
        assert "last stderr:" in errors[1] and "crash tool" in errors[1]
    else:
        for error in errors:
            assert "stderr" not in error and "crash tool" not in error
    assert any("exited with code 7; last stderr:" in line and "crash tool" in line for line in log)


def test_the_catalog_tells_clients_stderr_only_when_allowed() -> None:
    exited = BackendExitedError("process 12 exited with code 3", "Traceback | KeyError: 'API_KEY'")
    for expose in (False, True):
        _, inbox = trio.open_memory_channel[CatalogEvent](1)
        catalog = Catalog(
            order=["alpha"],
            request_timeouts_s={"alpha": 1.0},
            rule=PREFIX_ON_COLLISION,
            inbox=inbox,
            expose_stderr=expose,
        )
        assert catalog.apply(ChildFailed("alpha", exited, restarts=5))
        status = catalog.view().backends["alpha"]
        assert status.reason == "process 12 exited with code 3"
        full = "failed (process 12 exited with code 3; last stderr: Traceback | KeyError: 'API_KEY')"
        assert status.describe() == (full if expose else "failed (process 12 exited with code 3)")
        assert status.describe(stderr=True) == full  # mcp-gateway tools: the operator's own view
    assert str(exited) == "process 12 exited with code 3; last stderr: Traceback | KeyError: 'API_KEY'"
