"""Config loading: the shipped files, the issue's contract, and every mistake named by file and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from actors.cli import main
from actors.config import (
    AuditSettings,
    BackendEra,
    ConfigError,
    RestartConfig,
    StdioBackend,
    load_config,
    resolve_command,
)
from actors.config.secret import revealed
from actors.middleware.examples import ReadOnlyForGuests
from actors.middleware.loading import build_middleware

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
    assert config.path == ROOT / "config" / name
    assert [backend.name for backend in config.backends] == ["notes", "utility"]
    for backend in config.backends:
        assert backend.cwd == ROOT / "config"  # no cwd, or ".": the file's own folder
        assert resolve_command(backend) is not None
        assert backend.args[:2] == ("-m", f"mcp_gateway_examples.{backend.name}")  # shipped in the package
    utility = config.backends[1]  # sets nothing but name, command, args and cwd in both files
    assert utility.request_timeout_s is None and config.request_timeout_s(utility) == 60.0
    assert config.startup_timeout_s(utility) == 30.0
    assert utility.restart == RestartConfig() and utility.env == {}


def test_the_example_config_sets_every_key_and_overrides() -> None:
    config = load_config(ROOT / "config" / "example.toml")
    gateway = config.gateway
    assert (gateway.name, gateway.tool_names) == ("example-gateway", "prefix-on-collision")
    assert (gateway.request_timeout_s, gateway.startup_timeout_s, gateway.shutdown_s) == (60.0, 30.0, 5.0)
    assert gateway.max_message_bytes == 4 * 1024 * 1024
    notes = config.backends[0]
    assert notes.command == "python" and notes.env == {"NOTES_EXAMPLE": "1"}
    assert notes.args == ("-m", "mcp_gateway_examples.notes", "--db", "data/notes.sqlite3")
    assert (config.request_timeout_s(notes), config.startup_timeout_s(notes)) == (30.0, 10.0)
    assert (notes.era, notes.probe_timeout_s) == (BackendEra.AUTO, 10.0)
    assert notes.restart == RestartConfig(
        policy="permanent", max_restarts=5, window_s=60.0, backoff_initial_s=0.5, backoff_max_s=30.0
    )
    assert config.websocket is not None and config.websocket.auth is None
    assert config.http is not None and config.http.port == 8766 and config.http.resume_window_s == 5.0
    assert config.audit == AuditSettings(
        path=ROOT / "config" / "audit.sqlite3", max_bytes=10485760, backups=3, include_arguments=False
    )
    (guests,) = build_middleware(config)[1:]
    assert isinstance(guests, ReadOnlyForGuests) and guests.writers == {"alice"}


def test_the_examples_commented_out_time_backend_is_valid(tmp_path: Path) -> None:
    lines = (ROOT / "config" / "example.toml").read_text(encoding="utf-8").splitlines()
    start = lines.index('# name = "time"') - 1
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    assert block[0] == "[[backends]]"
    path = tmp_path / "time.toml"
    path.write_text("\n".join(block) + "\n", encoding="utf-8")
    (time,) = load_config(path).backends
    assert (time.name, time.command, time.args) == ("time", "mcp-server-time", ("--local-timezone", "UTC"))


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
    assert restart.stable_after_s == 120.0  # not in the file: the default
    assert (config.request_timeout_s(time), config.startup_timeout_s(time)) == (60.0, 30.0)
    assert time.request_timeout_s is None and time.url is None


def test_defaults_and_per_backend_overrides(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
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
    assert (a.era, a.probe_timeout_s) == (BackendEra.AUTO, 10.0)  # probed, 10 s at most


def test_the_era_of_a_backend_and_its_probe_timeout(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        MINIMAL_BACKEND + 'era = "modern"\n[[backends]]\nname = "b"\nurl = "http://127.0.0.1:1/mcp"\n'
        'era = "legacy"\nprobe_timeout_s = 0.5\n',
        encoding="utf-8",
    )
    a, b = load_config(path).backends
    assert (a.era, b.era, b.probe_timeout_s) == (BackendEra.MODERN, BackendEra.LEGACY, 0.5)
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + 'era = "2026-07-28"\nprobe_timeout_s = 0\n'
        '[[backends]]\nname = "b"\ncommand = "python"\nera = true\nprobe_timeout_s = "5"\n',
    )
    assert problems == {
        "backends[0].era": "'2026-07-28' is not one of 'auto', 'legacy', 'modern'",
        "backends[0].probe_timeout_s": "must be greater than 0",
        "backends[1].era": "expected a string, got a boolean",
        "backends[1].probe_timeout_s": "expected a number, got a string",
    }


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
    assert problems["backends[0].env.TZ"].startswith("expected a string or a secret")
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
    assert problems["backends[1].command"] == "required key is missing (or url, for a remote backend)"
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


def test_more_ranges_restart_and_health(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + "request_timeout_s = -0.5\n[backends.restart]\nstable_after_s = 0\n"
        "backoff_initial_s = -1\n[backends.health]\ninterval_s = -1\ntimeout_s = 0\nfailures = 0\n"
        '[[backends]]\nname = "b"\ncommand = "python"\n[backends.restart]\nbackoff_max_s = 0.25\n',
    )
    assert problems == {
        "backends[0].request_timeout_s": "must be greater than 0",
        "backends[0].restart.stable_after_s": "must be greater than 0",
        "backends[0].restart.backoff_initial_s": "must be 0 or more",
        "backends[0].health.interval_s": "must be 0 (off) or more",
        "backends[0].health.timeout_s": "must be greater than 0",
        "backends[0].health.failures": "must be 1 or more",
        # backoff_initial_s is not set: it is the default 0.5, which 0.25 is below
        "backends[1].restart.backoff_max_s": "must not be less than backoff_initial_s",
    }


def test_every_problem_in_a_file_is_reported_not_just_the_first(tmp_path: Path) -> None:
    path = tmp_path / "many.toml"
    path.write_text(
        'extra = 1\n[gateway]\ntool_names = "never"\nshutdown_s = 0\n'
        '[[backends]]\nname = "a"\ncommand = "python"\nargs = "x"\n'
        '[[backends]]\nname = "a"\ncommand = "python"\n[backends.restart]\npolicy = "sometimes"\n'
        '[[backends]]\nname = "c"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    keys = [problem.key for problem in caught.value.problems]
    assert sorted(keys) == sorted(
        [
            "extra",
            "gateway.tool_names",
            "gateway.shutdown_s",
            "backends[0].args",
            "backends[1].name",
            "backends[1].restart.policy",
            "backends[2].command",
        ]
    )
    assert all(problem.file == str(path) for problem in caught.value.problems)
    # the exception's message is every problem, one `FILE: key: reason` per line
    assert str(caught.value).splitlines() == [str(problem) for problem in caught.value.problems]
    assert f"{path}: backends[1].name: duplicate name 'a' (also backends[0])" in str(caught.value)


def test_syntax_errors_and_unreadable_files(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, '[gateway\nname = "x"\n')
    assert list(problems) == [""] and "not valid TOML" in problems[""] and "line 1" in problems[""]
    problems = problems_of(tmp_path, '[gateway]\nname = "x"\nname = "y"\n')
    assert "not valid TOML" in problems[""] and "line 3" in problems[""]
    problems = problems_of(tmp_path, "\n\n[[backends]]\nname = \n")
    assert "line 4" in problems[""]
    with pytest.raises(ConfigError) as missing:
        load_config(tmp_path / "nowhere.toml")
    assert str(missing.value) == f"{tmp_path / 'nowhere.toml'}: no such file"
    (problem,) = missing.value.problems
    assert (problem.file, problem.key, problem.reason) == (str(tmp_path / "nowhere.toml"), "", "no such file")
    with pytest.raises(ConfigError) as folder:
        load_config(tmp_path)
    assert str(folder.value) == f"{tmp_path}: is a directory, not a TOML file"
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe[gateway]\n")
    with pytest.raises(ConfigError) as undecodable:
        load_config(binary)
    assert str(undecodable.value).startswith(f"{binary}: not valid TOML: ")


def test_check_command_prints_every_problem_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gateway]\nname = 1\n[[backends]]\nname = "a"\n', encoding="utf-8")
    assert main(["check", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{bad}: gateway.name: expected a string, got an integer\n" in err
    assert f"{bad}: backends[0].command: required key is missing (or url, for a remote backend)\n" in err

    good = tmp_path / "good.toml"
    good.write_text(MINIMAL_BACKEND, encoding="utf-8")
    assert main(["check", "--config", str(good)]) == 0
    out, err = capsys.readouterr()
    assert out == f"{good.resolve()}: ok (1 backend)\n" and err == ""

    missing = tmp_path / "missing.toml"
    assert main(["check", "--config", str(missing)]) == 2
    assert capsys.readouterr() == ("", f"{missing}: no such file\n")


def test_resolve_command(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "server.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)

    def backend(command: str) -> StdioBackend:
        return StdioBackend(name="a", command=command, cwd=tmp_path)

    python = resolve_command(backend("python"))
    assert python is not None and os.path.dirname(python) == os.path.dirname(sys.executable)
    assert resolve_command(backend("no-such-program-anywhere")) is None
    assert resolve_command(backend("bin/server.sh")) == str(tmp_path / "bin" / "server.sh")
    assert resolve_command(backend("./bin/server.sh")) is not None
    assert resolve_command(backend("bin/missing.sh")) is None
    assert (
        resolve_command(StdioBackend(name="a", command="bin/server.sh", cwd=tmp_path / "bin")) is None
    )  # cwd-relative
    assert resolve_command(backend(str(script))) == str(script)  # an absolute path ignores cwd

    plain = tmp_path / "plain.sh"  # a file that is not executable is not a program
    plain.write_text("#!/bin/sh\n", encoding="utf-8")
    plain.chmod(0o644)
    assert resolve_command(backend("plain.sh")) is None and resolve_command(backend("./plain.sh")) is None


def test_resolve_command_searches_beside_the_interpreter_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for name in ("python", "only-on-path"):
        program = shadow / name
        program.write_text("#!/bin/sh\n", encoding="utf-8")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", str(shadow))
    # a bare name is looked up beside sys.executable first: PATH's own `python` loses
    python = resolve_command(StdioBackend(name="a", command="python", cwd=tmp_path))
    assert python is not None and os.path.dirname(python) == os.path.dirname(sys.executable)
    assert resolve_command(StdioBackend(name="a", command="only-on-path", cwd=tmp_path)) == str(
        shadow / "only-on-path"
    )
    # a bare name is never looked up in cwd, and a PATH set in the backend's env is the one searched
    assert (
        resolve_command(
            StdioBackend(name="a", command="only-on-path", cwd=shadow, env={"PATH": "/nonexistent"})
        )
        is None
    )


def test_python_dash_m_is_the_same_program(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("backends = 1\n[gateway]\nrequest_timeout_s = 0\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"{bad}: gateway.request_timeout_s: must be greater than 0",
        f"{bad}: backends: expected an array of tables ([[backends]]), got an integer",
    ]


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
    assert both == {"websocket.auth": "set at most one of jwt_secret_env and jwt_public_key_file"}
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


def test_http_settings_and_their_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + '[http]\nport = -1\npath = "mcp"\nsession_idle_s = 0\nresume_window_s = -1\n'
        'allowed_hosts = "localhost"\n',
    )
    assert problems == {
        "http.port": "must be between 0 and 65535 (0: any free port)",
        "http.path": "must start with '/'",
        "http.session_idle_s": "must be greater than 0",
        "http.resume_window_s": "must be 0 (no resuming) or more",
        "http.allowed_hosts": "expected an array of strings, got a string",
    }
    unset = problems_of(tmp_path, MINIMAL_BACKEND + '[http.auth]\njwt_secret_env = "NOT_SET_ANYWHERE"\n')
    assert unset == {"http.auth.jwt_secret_env": "environment variable NOT_SET_ANYWHERE is not set or empty"}
    monkeypatch.setenv("GATEWAY_TEST_SECRET", "s3cret")
    path = tmp_path / "ok.toml"
    path.write_text(MINIMAL_BACKEND + '[http]\n[http.auth]\njwt_secret_env = "GATEWAY_TEST_SECRET"\n')
    http = load_config(path).http
    assert http is not None and (http.host, http.port, http.path) == ("127.0.0.1", 8766, "/mcp")
    assert http.allowed_hosts == ("127.0.0.1", "localhost", "::1") and http.session_idle_s == 1800.0
    assert (http.max_sessions_per_client, http.initialize_timeout_s, http.body_timeout_s) == (32, 30.0, 30.0)
    assert http.auth is not None and "s3cret" not in repr(http)


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
    assert revealed(remote.headers) == {"X-Team": "a", "Authorization": "Bearer abc"}
    assert "abc" not in repr(remote) and "abc" not in repr(remote.headers)

    problems = problems_of(
        tmp_path,
        '[[backends]]\nname = "a"\ncommand = "python"\nurl = "ws://x"\n'
        '[[backends]]\nname = "b"\nurl = "ftp://x"\nargs = ["-v"]\n'
        '[[backends]]\nname = "c"\nurl = "ws://x"\nheaders_env = { Authorization = "NOT_SET_ANYWHERE" }\n',
    )
    assert "not both" in problems["backends[0].url"]
    assert (
        problems["backends[1].url"]
        == "must start with ws:// or wss:// (WebSocket) or http:// or https:// (Streamable HTTP)"
    )
    assert problems["backends[1].args"] == "applies to command backends only"
    assert problems["backends[2].headers_env.Authorization"] == (
        "environment variable NOT_SET_ANYWHERE is not set or empty"
    )


def test_nan_durations_are_refused(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        "[gateway]\nrequest_timeout_s = nan\n"
        + MINIMAL_BACKEND
        + "startup_timeout_s = nan\n[backends.restart]\nbackoff_max_s = nan\n",
    )
    assert "gateway.request_timeout_s" in problems
    assert "backends[0].startup_timeout_s" in problems
    assert "backends[0].restart.backoff_max_s" in problems


def test_a_backend_entry_that_is_not_a_table_is_one_problem(tmp_path: Path) -> None:
    assert problems_of(tmp_path, "backends = [1]\n") == {"backends[0]": "expected a table, got an integer"}


def test_a_missing_working_directory_and_bad_environment_names(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND
        + 'cwd = "nowhere"\n[[backends]]\nname = "b"\ncommand = "python"\nenv = { "A=B" = "1" }\n',
    )
    assert problems["backends[0].cwd"] == f"'nowhere' ({(tmp_path / 'nowhere').resolve()}) does not exist"
    assert problems["backends[1].env"] == "'A=B' is not a valid environment variable name"


def test_the_hardening_keys_and_their_problems(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        '[gateway]\ninitialize_hold_s = 0\nmax_inflight_per_session = 0\nexpose_backend_stderr = "yes"\n'
        '[[backends]]\nname = "a"\ncommand = "python"\nroots = "everyone"\ninherit_env = ["OK", "A=B", ""]\n'
        '[[backends]]\nname = "b"\ncommand = "python"\nroots = ["file:///srv", "http://x"]\n'
        '[[backends]]\nname = "c"\nurl = "ws://127.0.0.1:1/mcp"\ninherit_env = ["HOME"]\n'
        "[websocket]\nmax_sessions_per_client = 0\ninitialize_timeout_s = -1\n"
        "[http]\nbody_timeout_s = 0\n"
        "[audit]\nmax_age_s = -1\nmax_argument_bytes = 8\n",
    )
    assert problems == {
        "gateway.initialize_hold_s": "must be greater than 0",
        "gateway.max_inflight_per_session": "must be 1 or more",
        "gateway.expose_backend_stderr": "expected true or false, got a string",
        "backends[0].roots": "'everyone' is not one of 'none', 'client' or an array of file:// URIs",
        "backends[0].inherit_env[1]": "'A=B' is not a valid environment variable name",
        "backends[0].inherit_env[2]": "'' is not a valid environment variable name",
        "backends[1].roots": "item 1 ('http://x') is not a file:// URI",
        "backends[2].inherit_env": "applies to command backends only",
        "websocket.max_sessions_per_client": "must be 1 or more",
        "websocket.initialize_timeout_s": "must be greater than 0",
        "http.body_timeout_s": "must be greater than 0",
        "audit.max_age_s": "must be 0 (size only) or more",
        "audit.max_argument_bytes": "must be 16 or more",
    }


def test_the_hardening_keys_default_to_the_issues_values(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(MINIMAL_BACKEND + "[websocket]\n[http]\n")
    config = load_config(path)
    gateway, (backend,) = config.gateway, config.backends
    assert (gateway.initialize_hold_s, gateway.max_inflight_per_session) == (10.0, 256)
    assert gateway.expose_backend_stderr is False
    assert isinstance(backend, StdioBackend) and backend.inherit_env == () and backend.roots is None
    for listener in (config.websocket, config.http):
        assert listener is not None
        assert (listener.max_sessions_per_client, listener.initialize_timeout_s) == (32, 30.0)


def test_the_secrets_of_both_listeners_are_withheld_from_backends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WS_TOKEN_SECRET", "ws-secret")
    monkeypatch.setenv("HTTP_TOKEN_SECRET", "http-secret")
    path = tmp_path / "g.toml"
    path.write_text(
        MINIMAL_BACKEND + '[websocket.auth]\njwt_secret_env = "WS_TOKEN_SECRET"\n'
        '[http.auth]\njwt_secret_env = "HTTP_TOKEN_SECRET"\n'
    )
    assert load_config(path).secret_variables() == {"WS_TOKEN_SECRET", "HTTP_TOKEN_SECRET"}
    path.write_text(MINIMAL_BACKEND + "[http]\n")
    assert load_config(path).secret_variables() == frozenset()


def test_roots_default_to_the_one_client_only_without_network_listeners(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        MINIMAL_BACKEND + 'roots = ["file:///srv/a"]\n[[backends]]\nname = "b"\ncommand = "python"\n'
    )
    stdio_only = load_config(path)
    assert [stdio_only.roots_of(b) for b in stdio_only.backends] == [("file:///srv/a",), "client"]
    path.write_text(path.read_text() + "[http]\n")
    shared = load_config(path)
    assert [shared.roots_of(b) for b in shared.backends] == [("file:///srv/a",), "none"]


def test_a_relative_config_path_that_is_not_there_says_where_it_looked_and_suggests_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as missing:
        load_config("config/gateway.toml")
    looked = tmp_path / "config" / "gateway.toml"
    assert str(missing.value) == (
        f"config/gateway.toml: no such file (looked for {looked}; "
        "pass --config with the gateway's config file)"
    )


def test_the_byte_budgets_have_defaults_and_rules(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(MINIMAL_BACKEND)
    gateway = load_config(path).gateway
    assert (gateway.max_request_bytes, gateway.max_client_bytes) == (4 * 1024 * 1024, 16 * 1024 * 1024)
    assert gateway.max_unread_bytes == 64 * 1024 * 1024
    cases = {
        "max_message_bytes = 2097152\nmax_unread_bytes = 1048576": {
            "gateway.max_unread_bytes": "must not be less than max_message_bytes"
        },
        "max_unread_bytes = -1": {"gateway.max_unread_bytes": "must be at least 1024"},
        "max_request_bytes = 100": {"gateway.max_request_bytes": "must be at least 1024"},
        'max_client_bytes = "lots"': {"gateway.max_client_bytes": "expected an integer, got a string"},
        "max_request_bytes = 33554432": {
            "gateway.max_request_bytes": "must not be more than max_client_bytes"
        },
        "max_request_bytes = 4096\nmax_client_bytes = 2048": {
            "gateway.max_request_bytes": "must not be more than max_client_bytes",
            "gateway.max_client_bytes": "must not be less than max_request_bytes",
        },
    }
    for keys, expected in cases.items():
        assert problems_of(tmp_path, f"[gateway]\n{keys}\n{MINIMAL_BACKEND}") == expected, keys


def test_a_rate_limit_is_none_or_one_a_day_or_more(tmp_path: Path) -> None:
    """A rate of 1e-310 made its bucket's interval infinite: every call was admitted."""
    reason = "must be 0 (no limit) or at least 0.0000116 (one a day)"
    for key in ("calls_per_s", "http_requests_per_s"):
        for value in ("1e-310", "0.00001", "-1"):
            assert problems_of(tmp_path, f"{MINIMAL_BACKEND}\n[limits]\n{key} = {value}\n") == {
                f"limits.{key}": reason
            }, (key, value)
        path = tmp_path / "gateway.toml"
        path.write_text(f"{MINIMAL_BACKEND}\n[limits]\n{key} = 0.0000116\n")
        assert load_config(path).limits is not None
