"""Config loading: the shipped files, the issue's contract, and every mistake named by file and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.cli import main
from actors.config import BackendConfig, ConfigError, load_config, resolve_command

ROOT = Path(__file__).resolve().parent.parent

CONTRACT = """
[gateway]
name = "my-gateway"
tool_names = "prefix-on-collision"
request_timeout_s = 60

[[backends]]
name = "time"
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]
env = { TZ = "UTC" }
cwd = "."

[backends.restart]
policy = "permanent"
max_restarts = 5
window_s = 60
backoff_initial_s = 0.5
backoff_max_s = 30
"""

MINIMAL_BACKEND = '[[backends]]\nname = "a"\ncommand = "python"\n'


def problems_of(tmp_path: Path, text: str) -> dict[str, str]:
    """key -> reason for each problem in a config with this text; the file name is checked on each."""
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    for problem in caught.value.problems:
        assert str(problem).startswith(f"{path}: ")
    return {problem.key: problem.reason for problem in caught.value.problems}


@pytest.mark.parametrize("name", ["gateway.toml", "example.toml"])
def test_the_shipped_configs_load(name: str) -> None:
    config = load_config(ROOT / "config" / name)
    assert [backend.name for backend in config.backends][:2] == ["notes", "utility"]
    for backend in config.backends:
        assert backend.cwd == ROOT  # cwd = ".." from config/
        assert resolve_command(backend) is not None


def test_the_contract_example_loads_with_its_values(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(CONTRACT, encoding="utf-8")
    config = load_config(path)
    assert config.gateway.name == "my-gateway" and config.gateway.tool_names == "prefix-on-collision"
    (time,) = config.backends
    assert time.name == "time" and time.command == "mcp-server-time"
    assert time.args == ("--local-timezone", "UTC") and time.env == {"TZ": "UTC"}
    assert time.cwd == tmp_path.resolve()
    restart = time.restart
    assert (restart.policy, restart.max_restarts, restart.window_s) == ("permanent", 5, 60.0)
    assert (restart.backoff_initial_s, restart.backoff_max_s) == (0.5, 30.0)


def test_defaults_and_per_backend_overrides(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        MINIMAL_BACKEND + '\n[[backends]]\nname = "b"\ncommand = "python"\nrequest_timeout_s = 5\n'
        'startup_timeout_s = 2\ncwd = "sub"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    a, b = config.backends
    assert config.gateway.name == "mcp-gateway" and config.gateway.shutdown_s == 5.0
    assert (config.request_timeout_s(a), config.startup_timeout_s(a)) == (60.0, 30.0)
    assert (config.request_timeout_s(b), config.startup_timeout_s(b)) == (5.0, 2.0)
    assert (
        a.args == () and a.env == {} and a.restart.policy == "permanent" and a.restart.stable_after_s == 120.0
    )
    assert b.cwd == (tmp_path / "sub").resolve()


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        'colour = "red"\n[gateway]\nnmae = "x"\n'
        + MINIMAL_BACKEND
        + "retries = 3\n[backends.restart]\nmax = 1\n",
    )
    assert "unknown key" in problems["colour"]
    assert "unknown key" in problems["gateway.nmae"] and "name" in problems["gateway.nmae"]
    assert "unknown key" in problems["backends[0].retries"]
    assert (
        "unknown key" in problems["backends[0].restart.max"]
        and "max_restarts" in problems["backends[0].restart.max"]
    )


def test_wrong_types_are_named_and_never_coerced(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        "[gateway]\nrequest_timeout_s = true\nname = 5\n"
        '[[backends]]\nname = "a"\ncommand = "python"\nargs = "--flag"\nenv = { TZ = 5 }\n'
        'cwd = ["."]\nrestart = 3\n'
        '[[backends]]\nname = "b"\ncommand = "python"\n'
        '[backends.restart]\nmax_restarts = "5"\nwindow_s = "60"\n',
    )
    assert problems["gateway.request_timeout_s"] == "expected a number, got a boolean"
    assert problems["gateway.name"] == "expected a string, got an integer"
    assert problems["backends[0].args"] == "expected an array of strings, got a string"
    assert "TZ" in problems["backends[0].env"] and "string" in problems["backends[0].env"]
    assert problems["backends[0].cwd"] == "expected a string, got an array"
    assert "expected a table" in problems["backends[0].restart"]
    assert problems["backends[1].restart.max_restarts"] == "expected an integer, got a string"
    assert problems["backends[1].restart.window_s"] == "expected a number, got a string"


def test_required_keys_names_and_duplicates(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        '[[backends]]\ncommand = "python"\n'
        '[[backends]]\nname = "a"\n'
        '[[backends]]\nname = "a"\ncommand = "python"\n'
        '[[backends]]\nname = "has space"\ncommand = "python"\n'
        '[[backends]]\nname = "b"\ncommand = ""\n',
    )
    assert problems["backends[0].name"] == "required key is missing"
    assert problems["backends[1].command"] == "required key is missing (or url, for a WebSocket backend)"
    assert problems["backends[2].name"] == "duplicate name 'a' (also backends[1])"
    assert "letters, digits" in problems["backends[3].name"]
    assert problems["backends[4].command"] == "must not be empty"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[gateway]\n", "missing: add at least one [[backends]] table"),
        ("backends = []\n", "empty: add at least one [[backends]] table"),
        ('[backends]\nname = "a"\n', "expected an array of tables ([[backends]]), got a table"),
    ],
)
def test_the_backend_list_must_have_entries(tmp_path: Path, text: str, reason: str) -> None:
    assert problems_of(tmp_path, text) == {"backends": reason}


def test_values_out_of_range_and_unknown_choices(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        '[gateway]\ntool_names = "sometimes"\nrequest_timeout_s = 0\nshutdown_s = -1\n'
        "max_message_bytes = 10\n"
        + MINIMAL_BACKEND
        + 'startup_timeout_s = 0\n[backends.restart]\npolicy = "forever"\nmax_restarts = -1\nwindow_s = 0\n'
        "backoff_initial_s = 5\nbackoff_max_s = 1\n",
    )
    assert problems["gateway.tool_names"].startswith("'sometimes' is not one of 'prefix-on-collision'")
    assert problems["gateway.request_timeout_s"] == "must be greater than 0"
    assert problems["gateway.shutdown_s"] == "must be greater than 0"
    assert problems["gateway.max_message_bytes"] == "must be at least 1024"
    assert problems["backends[0].startup_timeout_s"] == "must be greater than 0"
    assert problems["backends[0].restart.policy"].startswith("'forever' is not one of 'permanent'")
    assert problems["backends[0].restart.max_restarts"] == "must be 0 or more"
    assert problems["backends[0].restart.window_s"] == "must be greater than 0"
    assert problems["backends[0].restart.backoff_max_s"] == "must not be less than backoff_initial_s"


def test_syntax_errors_and_missing_files(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, '[gateway\nname = "x"\n')
    assert list(problems) == [""] and "not valid TOML" in problems[""] and "line 1" in problems[""]
    with pytest.raises(ConfigError) as missing:
        load_config(tmp_path / "nowhere.toml")
    assert str(missing.value) == f"{tmp_path / 'nowhere.toml'}: no such file"


def test_check_command_prints_every_problem_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gateway]\nname = 1\n[[backends]]\nname = "a"\n', encoding="utf-8")
    assert main(["check", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{bad}: gateway.name: expected a string, got an integer\n" in err
    assert f"{bad}: backends[0].command: required key is missing (or url, for a WebSocket backend)\n" in err

    good = tmp_path / "good.toml"
    good.write_text(MINIMAL_BACKEND, encoding="utf-8")
    assert main(["check", "--config", str(good)]) == 0
    assert capsys.readouterr().out == f"{good.resolve()}: ok (1 backend)\n"


def test_resolve_command(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "server.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)

    def backend(command: str) -> BackendConfig:
        return BackendConfig("a", command, cwd=tmp_path)

    python = resolve_command(backend("python"))
    assert python is not None and os.path.dirname(python) == os.path.dirname(sys.executable)
    assert resolve_command(backend("no-such-program-anywhere")) is None
    assert resolve_command(backend("bin/server.sh")) == str(tmp_path / "bin" / "server.sh")
    assert resolve_command(backend("bin/missing.sh")) is None


def test_python_dash_m_is_the_same_program(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("backends = 1\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"{bad}: backends: expected an array of tables ([[backends]]), got an integer\n"


def test_websocket_settings_and_their_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + '[websocket]\nport = 70000\npath = "mcp"\nallowed_origins = "x"\nextra = 1\n'
        '[websocket.auth]\njwt_secret_env = "NOT_SET_ANYWHERE"\naudience = 5\n',
    )
    assert problems["websocket.port"] == "must be between 0 and 65535 (0: any free port)"
    assert problems["websocket.path"] == "must start with '/'"
    assert problems["websocket.allowed_origins"] == "expected an array of strings, got a string"
    assert "unknown key" in problems["websocket.extra"]
    assert problems["websocket.auth.audience"] == "expected a string, got an integer"

    both = problems_of(
        tmp_path, MINIMAL_BACKEND + '[websocket.auth]\njwt_secret_env = "A"\njwt_public_key_file = "k.pem"\n'
    )
    assert both == {"websocket.auth": "set exactly one of jwt_secret_env and jwt_public_key_file"}
    unset = problems_of(tmp_path, MINIMAL_BACKEND + '[websocket.auth]\njwt_secret_env = "NOT_SET_ANYWHERE"\n')
    assert unset == {
        "websocket.auth.jwt_secret_env": "environment variable NOT_SET_ANYWHERE is not set or empty"
    }

    monkeypatch.setenv("GATEWAY_TEST_SECRET", "s3cret")
    path = tmp_path / "ok.toml"
    path.write_text(
        MINIMAL_BACKEND + '[websocket.auth]\njwt_secret_env = "GATEWAY_TEST_SECRET"\n', encoding="utf-8"
    )
    websocket = load_config(path).websocket
    assert websocket is not None and websocket.port == 8765 and websocket.host == "127.0.0.1"
    assert websocket.auth is not None and websocket.auth.algorithms == ("HS256",)
    assert "s3cret" not in repr(websocket)  # the secret never shows up in a repr or a log line


def test_websocket_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_TOKEN", "Bearer abc")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    path = tmp_path / "ok.toml"
    path.write_text(
        '[[backends]]\nname = "remote"\nurl = "ws://127.0.0.1:9000/mcp"\nheaders = { X-Team = "a" }\n'
        'headers_env = { Authorization = "REMOTE_TOKEN" }\n',
        encoding="utf-8",
    )
    (remote,) = load_config(path).backends
    assert remote.url == "ws://127.0.0.1:9000/mcp" and remote.command is None
    assert remote.headers == {"X-Team": "a", "Authorization": "Bearer abc"}
    assert "abc" not in repr(remote)

    problems = problems_of(
        tmp_path,
        '[[backends]]\nname = "a"\ncommand = "python"\nurl = "ws://x"\n'
        '[[backends]]\nname = "b"\nurl = "http://x"\nargs = ["-v"]\n'
        '[[backends]]\nname = "c"\nurl = "ws://x"\nheaders_env = { Authorization = "NOT_SET_ANYWHERE" }\n',
    )
    assert "not both" in problems["backends[0].url"]
    assert problems["backends[1].url"] == "must start with ws:// or wss://"
    assert problems["backends[1].args"] == "applies to command backends only"
    assert problems["backends[2].headers_env.Authorization"] == (
        "environment variable NOT_SET_ANYWHERE is not set or empty"
    )
