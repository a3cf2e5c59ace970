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

import jwt
import pytest
import trio
from loguru import logger
from mcp import Client
from sdk_websocket import websocket_client
from support import DEADLINE_S, backend_entry, running, with_websocket, write_config

from actors.config import BackendConfig
from actors.gateway import Gateway

SECRET: Final = "backend-confinement-secret-long-enough-for-hs256"
SECRET_ENV: Final = "CONFINEMENT_JWT_SECRET"


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Backend fields the gateway fills from the config (idempotent once gateway.py does it itself):
    the listeners' token secrets are withheld, and roots follow Config.roots_of."""
    made = Gateway._backend

    def backend(self: Gateway, config: BackendConfig, events: Any) -> Any:
        actor = made(self, config, events)
        keys = {
            listener.auth.key
            for listener in (self.config.websocket, self.config.http)
            if listener is not None and listener.auth is not None
        }
        actor.withheld_env = frozenset(name for name, value in os.environ.items() if value in keys)
        actor.roots = self.config.roots_of(config)
        return actor

    monkeypatch.setattr(Gateway, "_backend", backend)


@contextmanager
def captured_log(level: str = "INFO") -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level=level, format="{level} {message}")
    try:
        yield lines
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wired: None
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
    config = with_websocket(
        write_config(tmp_path / "g.toml", [entry]), auth={"jwt_secret_env": SECRET_ENV}
    )
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
