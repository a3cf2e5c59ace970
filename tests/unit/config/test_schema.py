"""The schema: each key declared once with its rule, backend kinds, the keys both listeners share."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from actors.config import (
    BackendKind,
    Config,
    ConfigError,
    HttpSettings,
    ListenerSettings,
    RemoteBackend,
    RestartConfig,
    StdioBackend,
    WebSocketSettings,
    load_config,
)


def loaded(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_a_backend_is_a_command_or_a_url_and_its_kind_follows(tmp_path: Path) -> None:
    config = loaded(
        tmp_path,
        '[[backends]]\nname = "local"\ncommand = "python"\n'
        '[[backends]]\nname = "socket"\nurl = "wss://example.org/mcp"\n'
        '[[backends]]\nname = "web"\nurl = "https://example.org/mcp"\n',
    )
    local, socket, web = config.backends
    assert isinstance(local, StdioBackend) and local.kind is BackendKind.STDIO and local.url is None
    assert isinstance(socket, RemoteBackend) and socket.kind is BackendKind.WEBSOCKET
    assert isinstance(web, RemoteBackend) and web.kind is BackendKind.HTTP and web.command is None
    assert not hasattr(web, "args") and not hasattr(web, "cwd")  # a remote backend has no command keys


def test_both_listeners_share_one_declaration_of_their_common_keys() -> None:
    shared = {field.name for field in attrs.fields(ListenerSettings)}
    for listener in (WebSocketSettings, HttpSettings):
        assert shared < {field.name for field in attrs.fields(listener)}
    websocket, http = WebSocketSettings(), HttpSettings()
    assert (websocket.port, http.port) == (8765, 8766)
    for name in shared:
        assert getattr(websocket, name) == getattr(http, name)


def test_rules_hold_for_code_as_for_files() -> None:
    with pytest.raises(ValueError, match="must be greater than 0"):
        RestartConfig(window_s=0)
    with pytest.raises(ValueError, match="must not be less than backoff_initial_s"):
        RestartConfig(backoff_initial_s=2.0, backoff_max_s=1.0)
    with pytest.raises(ValueError, match="must start with '/'"):
        HttpSettings(path="mcp")


def test_a_table_reports_wrong_types_and_broken_rules_together(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n[backends.restart]\nmax_restarts = "x"\nwindow_s = 0\n'
        '[backends.tools]\nrename = { a = "", b = "c" }\n[websocket]\nport = "x"\nsend_timeout_s = 0\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {problem.key: problem.reason for problem in caught.value.problems}
    assert problems == {
        "backends[0].restart.max_restarts": "expected an integer, got a string",
        "backends[0].restart.window_s": "must be greater than 0",
        "backends[0].tools.rename.a": "must not be empty",
        "websocket.port": "expected an integer, got a string",
        "websocket.send_timeout_s": "must be greater than 0",
    }
