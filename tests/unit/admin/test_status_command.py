"""`mcp-gateway status`: the tree as printed, and the one-line answers when there is no tree to print."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from catalog_double import crashed, make_catalog, make_model, ready, tell

from actors.admin.status_command import StatusError, _where, duration, format_tree
from actors.backends.errors import BackendRefusedError
from actors.cli import format_catalog
from actors.runtime.supervisor import ChildStopped

TREE = {
    "gateway": {
        "name": "gw",
        "version": "0.1.0",
        "pid": 10,
        "uptime_s": 3725.5,
        "config": "/g.toml",
        "ready": False,
        "settled": True,
    },
    "frontends": [
        {
            "name": "websocket",
            "url": "ws://127.0.0.1:8765/mcp",
            "session_count": 3,
            "sessions": ["ws-1", "ws-2"],
        },
        {"name": "stdio", "url": None, "session_count": 1, "sessions": ["stdio"]},
    ],
    "backends": [
        {
            "name": "alpha",
            "state": "ready",
            "reason": None,
            "required": True,
            "pid": 11,
            "uptime_s": 61.0,
            "restarts": 1,
            "tools": 4,
            "inflight": 2,
            "last_error": {"at": 0.0, "reason": "exited with code 1"},
        },
        {
            "name": "beta",
            "state": "failed",
            "reason": "command 'x' not found",
            "required": False,
            "pid": None,
            "uptime_s": None,
            "restarts": 5,
            "tools": 0,
            "inflight": 0,
            "last_error": None,
        },
    ],
}


def test_the_tree_as_printed() -> None:
    assert format_tree(TREE).splitlines() == [
        "gateway gw 0.1.0: NOT READY, pid 10, up 1h 2m (/g.toml)",
        "├── frontends",
        "│   ├── websocket ws://127.0.0.1:8765/mcp: 3 sessions",
        "│   │   ws-1, ws-2 and 1 more",
        "│   └── stdio: 1 session",
        "│       stdio",
        "└── backends",
        "    ├── alpha (required): ready, pid 11, up 1m 1s, 1 restart, 4 tools, 2 in flight",
        "    │   last error: exited with code 1",
        "    └── beta: failed (command 'x' not found), 5 restarts, 0 tools",
    ]


def test_durations() -> None:
    assert [duration(s) for s in (0.4, 42, 3600, 90061)] == ["0s", "42s", "1h", "1d 1h"]


def test_where_the_config_says_the_admin_listener_is(tmp_path: Path) -> None:
    config = tmp_path / "g.toml"
    config.write_text(
        '[[backends]]\nname = "a"\ncommand = "x"\n[admin]\nhost = "0.0.0.0"\nport = 9100\n'
        'token_env = "GW_ADMIN"\n'
    )
    args = argparse.Namespace(url=None, config=str(config), default_config="config/gateway.toml")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GW_ADMIN", "tok")
        assert _where(args) == ("http://127.0.0.1:9100", "tok")  # a wildcard host is reached on loopback
    with pytest.raises(StatusError) as unset:
        _where(args)
    assert unset.value.code == 2 and "admin.token_env: environment variable GW_ADMIN is not set" in str(
        unset.value
    )
    url = argparse.Namespace(url="http://h:1/", config=None, default_config="x")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MCP_GATEWAY_ADMIN_TOKEN", "t")
        assert _where(url) == ("http://h:1", "t")


def test_the_tree_says_which_eras_a_backend_is_connected_in() -> None:
    """A backend of both eras with a legacy lane beside its modern connection (issue #24)."""
    alpha = {**TREE["backends"][0], "eras": "modern+legacy", "last_error": None}
    tree = {**TREE, "backends": [alpha]}
    line = format_tree(tree).splitlines()[-1]
    facts = "ready, pid 11, up 1m 1s, 1 restart, 4 tools, 2 in flight, eras modern+legacy"
    assert line == f"    └── alpha (required): {facts}"


async def test_the_tools_command_says_which_eras_each_ready_backend_is_connected_in() -> None:
    catalog = make_catalog("alpha", "beta")
    tell(catalog, ready("alpha", "echo"))
    lines = format_catalog(catalog.view(), {"alpha": "modern", "beta": "legacy"}).splitlines()
    assert "backend alpha: ready, 1 tools, eras modern" in lines
    beta = next(line for line in lines if line.startswith("backend beta: "))
    assert "eras" not in beta  # not ready: no run to speak of


def test_a_listening_backend_says_listening_and_what_a_backend_wrote_is_escaped() -> None:
    alpha = {**TREE["backends"][0], "inflight": 0, "listening": True}  # type: ignore[index]
    alpha["last_error"] = {"at": 0.0, "reason": "exited; stderr: ERROR \x1b]0;pwned\x07\x1b[2J"}
    tree = {**TREE, "backends": [alpha]}
    lines = format_tree(tree).splitlines()
    assert lines[-2].endswith("1 restart, 4 tools, listening")
    assert lines[-1].endswith("last error: exited; stderr: ERROR \\x1b]0;pwned\\x07\\x1b[2J")
    assert "\x1b" not in format_tree(tree)


def test_the_tools_command_escapes_what_a_backend_wrote() -> None:
    catalog = make_catalog("alpha", "beta")
    tell(catalog, ready("alpha", "add\x1b[8m"))
    tell(catalog, crashed("beta", "process 7 exited with code 1", "ERROR \x1b]0;pwned\x07"))
    printed = format_catalog(catalog.view())
    assert "\x1b" not in printed and "\x07" not in printed
    assert "add\\x1b[8m" in printed and "ERROR \\x1b]0;pwned\\x07" in printed


async def test_a_backend_refused_by_its_pins_is_shown_as_pin_mismatch_with_both_digests() -> None:
    catalog = make_catalog("alpha")
    refused = BackendRefusedError("/srv/server.py: expected sha256:01, found sha256:02", state="pin_mismatch")
    tell(catalog, ChildStopped("alpha", refused))
    line = format_tree(make_model(catalog).status()).splitlines()[-1]
    why = "/srv/server.py: expected sha256:01, found sha256:02"
    assert line == f"    └── alpha: pin_mismatch ({why}), 0 restarts, 0 tools"
