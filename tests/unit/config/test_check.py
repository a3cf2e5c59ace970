"""`mcp-gateway check`: every problem in one pass (structure, paths and the backends' programs together), each
as `FILE: key: reason` with a path shown as written and as resolved; and relative paths in a config taken
against the config file's folder, never the folder the command runs in."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Final

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import StdioBackend, load_config
from actors.config.commands import CommandNotFoundError, locate_command

PEM: Final = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`check`'s exit code and its stderr lines."""
    code = main(["check", "--config", str(path)])
    return code, capsys.readouterr().err.splitlines()


def executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_check_reports_structure_paths_and_commands_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = tmp_path.resolve()
    path = tmp_path / "g.toml"
    path.write_text(
        "[gateway]\nnmae = 'typo'\n"
        '[[backends]]\nname = "a"\ncommand = "/nowhere/server"\n'
        '[[backends]]\nname = "b"\ncommand = "python"\ncwd = "missing"\n'
        '[[backends]]\nname = "c"\ncommand = "no-such-program-anywhere"\n'
    )
    code, lines = check(path, capsys)
    assert code == EXIT_CONFIG_ERROR
    keys = [line.removeprefix(f"{path}: ").split(":")[0] for line in lines]
    assert keys == ["gateway.nmae", "backends[0].command", "backends[1].cwd", "backends[2].command"]
    assert lines[1] == f"{path}: backends[0].command: '/nowhere/server' does not exist"
    assert lines[2] == f"{path}: backends[1].cwd: 'missing' ({tmp_path / 'missing'}) does not exist"
    here = os.path.dirname(sys.executable)
    assert lines[3] == (
        f"{path}: backends[2].command: 'no-such-program-anywhere' is not found beside the gateway's "
        f"Python ({here}) or on PATH"
    )


def test_an_absolute_command_that_does_not_exist_says_so_and_blames_no_path(tmp_path: Path) -> None:
    backend = StdioBackend(name="a", command=str(tmp_path / "gone" / "server"), cwd=tmp_path)
    with pytest.raises(CommandNotFoundError) as missing:
        locate_command(backend)
    assert str(missing.value) == f"{str(tmp_path / 'gone' / 'server')!r} does not exist"
    assert "PATH" not in str(missing.value)


def test_a_relative_command_is_shown_as_written_and_as_resolved(tmp_path: Path) -> None:
    with pytest.raises(CommandNotFoundError) as missing:
        locate_command(StdioBackend(name="a", command="bin/server.sh", cwd=tmp_path))
    assert str(missing.value) == f"'bin/server.sh' ({tmp_path / 'bin' / 'server.sh'}) does not exist"


def test_a_command_found_but_not_executable_says_so(tmp_path: Path) -> None:
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")
    with pytest.raises(CommandNotFoundError) as plain:
        locate_command(StdioBackend(name="a", command="./plain.sh", cwd=tmp_path))
    assert str(plain.value).startswith(f"'./plain.sh' ({tmp_path / 'plain.sh'}) is not executable")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_text("#!/bin/sh\n")  # a bare name on the backend's PATH
    on_path = StdioBackend(name="a", command="tool", cwd=tmp_path, env={"PATH": str(tmp_path / "bin")})
    with pytest.raises(CommandNotFoundError) as found:
        locate_command(on_path)
    assert str(found.value) == f"'tool' is found at {tmp_path / 'bin' / 'tool'}, which is not executable"
    with pytest.raises(CommandNotFoundError) as folder:
        locate_command(StdioBackend(name="a", command=str(tmp_path / "bin"), cwd=tmp_path))
    assert str(folder.value) == f"{str(tmp_path / 'bin')!r} is a directory, not a program"


def test_a_bare_name_not_found_names_the_backends_own_path_when_it_sets_one(tmp_path: Path) -> None:
    backend = StdioBackend(name="a", command="no-such-program", cwd=tmp_path, env={"PATH": str(tmp_path)})
    with pytest.raises(CommandNotFoundError) as missing:
        locate_command(backend)
    assert str(missing.value).endswith("or on the backend's env.PATH")


def test_relative_paths_resolve_against_the_config_folder_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every path-valued key: a backend's cwd, a command with a slash (against that cwd), the audit file
    and the public key file. The process runs elsewhere, as the systemd unit runs in /var/lib/mcp-gateway."""
    folder = tmp_path.resolve() / "etc" / "mcp-gateway"
    executable(folder / "work" / "bin" / "run.sh")
    (folder / "keys").mkdir()
    (folder / "keys" / "gw.pem").write_text(PEM)
    path = folder / "gateway.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "bin/run.sh"\ncwd = "work"\n'
        '[audit]\npath = "audit/calls.sqlite3"\n'
        '[http]\nport = 0\n[http.auth]\njwt_public_key_file = "keys/gw.pem"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(path)
    (backend,) = config.backends
    assert isinstance(backend, StdioBackend) and backend.cwd == folder / "work"
    assert locate_command(backend) == str(folder / "work" / "bin" / "run.sh")
    assert config.audit is not None and config.audit.path == folder / "audit" / "calls.sqlite3"
    assert config.http is not None and config.http.auth is not None and config.http.auth.key == PEM
    assert check(path, capsys) == (0, [])
    assert not any(elsewhere.iterdir())


def test_a_missing_key_file_is_shown_as_written_and_as_resolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = tmp_path.resolve()
    path = tmp_path / "g.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n'
        '[http]\nport = 0\n[http.auth]\njwt_public_key_file = "keys/none.pem"\n'
    )
    code, lines = check(path, capsys)
    assert code == EXIT_CONFIG_ERROR
    assert lines == [
        f"{path}: http.auth.jwt_public_key_file: cannot read 'keys/none.pem' "
        f"({tmp_path / 'keys' / 'none.pem'}): No such file or directory"
    ]


def test_check_refuses_a_python_script_or_module_a_start_could_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: config/gateway.toml installed in /etc/mcp-gateway named examples/notes.py against
    cwd = "..", which is /etc there, and check passed. Python's script or `-m` module is checked now."""
    tmp_path = tmp_path.resolve()
    folder = tmp_path / "etc" / "mcp-gateway"
    folder.mkdir(parents=True)
    (folder / "server.py").write_text("pass\n")
    path = folder / "gateway.toml"
    path.write_text(
        '[[backends]]\nname = "old"\ncommand = "python"\nargs = ["examples/notes.py"]\ncwd = ".."\n'
        '[[backends]]\nname = "typo"\ncommand = "python"\nargs = ["-u", "-m", "mcp_gateway_examples.nots"]\n'
        '[[backends]]\nname = "gone"\ncommand = "python"\nargs = ["-m", "no_such_package_anywhere"]\n'
        '[[backends]]\nname = "demo"\ncommand = "python"\nargs = ["-m", "mcp_gateway_examples.notes"]\n'
        '[[backends]]\nname = "here"\ncommand = "python"\nargs = ["-X", "dev", "server.py", "x.py"]\n'
        '[[backends]]\nname = "inline"\ncommand = "python"\nargs = ["-c", "pass", "missing.py"]\n'
    )
    code, lines = check(path, capsys)
    assert code == EXIT_CONFIG_ERROR
    own = f"is not found by the gateway's Python ({sys.executable})"
    assert lines == [
        f"{path}: backends[0].args[0]: 'examples/notes.py' ({tmp_path / 'etc' / 'examples' / 'notes.py'}) "
        "does not exist",
        f"{path}: backends[1].args[2]: module 'mcp_gateway_examples.nots' {own}",
        f"{path}: backends[2].args[1]: module 'no_such_package_anywhere' {own}",
    ]
    assert load_config(path).backends[0].name == "old"  # a start loads it: that backend alone fails


def test_check_refuses_a_listener_host_this_machine_cannot_listen_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start exits 2 on it (`cannot listen on ...`); check says so with the rest. Only the host is tried,
    on a free port: a gateway already serving the file's own ports does not make check fail."""
    path = tmp_path.resolve() / "g.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "/nowhere/server"\n'
        '[websocket]\nhost = "192.0.2.1"\nport = 0\n'  # TEST-NET-1: no machine's own address
        '[http]\nhost = "127.0.0.1"\nport = 0\n'
        '[admin]\nhost = "a\\u0000b"\nport = 0\ntoken_env = "CHECK_ADMIN_TOKEN"\n'
    )
    monkeypatch.setenv("CHECK_ADMIN_TOKEN", "admin-token")
    code, lines = check(path, capsys)
    assert code == EXIT_CONFIG_ERROR
    assert lines[0] == f"{path}: backends[0].command: '/nowhere/server' does not exist"
    assert lines[1].startswith(f"{path}: websocket.host: cannot listen on '192.0.2.1' here: ")
    assert lines[2].startswith(f"{path}: admin.host: 'a\\x00b' does not resolve: ")
    assert len(lines) == 3


def test_check_warns_of_a_listener_open_to_other_machines_without_auth_and_still_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path.resolve() / "g.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n'
        '[websocket]\nhost = "0.0.0.0"\nport = 0\n'
        '[http]\nhost = "0.0.0.0"\nport = 0\n[http.auth]\njwt_secret_env = "CHECK_JWT_SECRET"\n'
    )
    monkeypatch.setenv("CHECK_JWT_SECRET", "a-secret-long-enough-for-hs256-signing")
    code, lines = check(path, capsys)
    assert code == 0
    (warning,) = lines
    assert warning.startswith(f"{path}: websocket.host: warning: 0.0.0.0 is reachable from other machines")
    assert "add [websocket.auth] (see config/auth.toml) or listen on 127.0.0.1" in warning


def test_check_warns_of_trust_nobody_can_review_and_still_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path.resolve() / "g.toml"
    path.write_text('[trust]\nmode = "pin"\n[[backends]]\nname = "a"\ncommand = "python"\n')
    code, lines = check(path, capsys)
    assert code == 0
    (warning,) = lines
    assert warning.startswith(f"{path}: admin.token_env: warning: [trust] holds changed definitions of a,")
    monkeypatch.setenv("CHECK_ADMIN_TOKEN", "a-token")
    path.write_text(path.read_text() + '[admin]\nport = 0\ntoken_env = "CHECK_ADMIN_TOKEN"\n')
    assert check(path, capsys) == (0, [])


def test_check_warns_of_route_auth_no_listener_can_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path.resolve() / "g.toml"
    path.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n'
        '[[routes]]\nname = "r"\npaths = ["/r"]\n[routes.auth]\nrequired_scopes = ["r"]\n'
    )
    code, lines = check(path, capsys)
    assert code == 0
    (warning,) = lines
    assert warning.startswith(f"{path}: routes[0].auth: warning: no listener's [NAME.auth] trusts issuers")
