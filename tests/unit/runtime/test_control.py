"""Control files (runtime/control.py, control_peers.py): a private folder, names no one else can make the
gateway write through, pid files checked before anyone is signalled, outcomes read with care."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import orjson
import pytest

from actors.cli_reload import await_outcomes
from actors.runtime.control import ControlFiles, config_key, control_folders, fallback_folder
from actors.runtime.control_peers import Peer, find_peers, is_serve_command, read_outcome, signal_peer


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A private XDG_RUNTIME_DIR, and a temp folder of our own for the fallback."""
    runtime, temp = tmp_path / "run", tmp_path / "tmp"
    runtime.mkdir(mode=0o700)
    temp.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    return runtime, temp


@attrs.frozen
class Told:
    ok: bool
    lines: tuple[str, ...]


def test_a_symlink_planted_at_the_pid_or_outcome_name_is_not_written_through(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    runtime, _ = folders
    config, victim = tmp_path / "g.toml", tmp_path / "victim"
    victim.write_text("precious")
    key = config_key(config)
    planted = ControlFiles(runtime, key, os.getpid())
    planted.pid_path.symlink_to(victim)
    planted.outcome_path.symlink_to(victim)
    files = ControlFiles.claim(config)
    assert files is not None and files.pid_path == planted.pid_path
    assert not files.pid_path.is_symlink() and files.pid_path.stat().st_mode & 0o777 == 0o600
    files.tell(Told(True, ("done",)))
    files.outcome_path.unlink()
    files.outcome_path.symlink_to(victim)
    files.tell(Told(True, ("again",)))  # renamed over the link, never written through it
    assert victim.read_text() == "precious"
    assert not files.outcome_path.is_symlink()
    files.release()
    assert victim.read_text() == "precious" and sorted(os.listdir(runtime)) == []


def test_files_of_other_names_do_not_stop_a_start(folders: tuple[Path, Path], tmp_path: Path) -> None:
    runtime, _ = folders
    config = tmp_path / "g.toml"
    key = config_key(config)
    for name in (f"mcp-gateway-{key}.pid", f"mcp-gateway-{key}.pid.tmp", f"mcp-gateway-{key}-1.pid"):
        (runtime / name).write_text("4242")
    files = ControlFiles.claim(config)
    assert files is not None and orjson.loads(files.pid_path.read_bytes())["pid"] == os.getpid()
    assert (runtime / f"mcp-gateway-{key}.pid").read_text() == "4242"  # not ours: untouched
    files.release()


def test_a_folder_open_to_others_is_not_used_and_the_start_goes_on(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    runtime, _ = folders
    runtime.chmod(0o777)
    files = ControlFiles.claim(tmp_path / "g.toml")
    assert files is not None and files.folder == fallback_folder()  # the private fallback instead
    assert fallback_folder().stat().st_mode & 0o777 == 0o700
    files.release()
    fallback_folder().rmdir()
    fallback_folder().symlink_to(runtime)  # planted by someone: refused as well
    assert ControlFiles.claim(tmp_path / "g.toml") is None  # a warning; serve goes on without
    if os.geteuid() == 0:  # root can make a folder another user's
        os.chown(runtime, 65534, 65534)
        runtime.chmod(0o700)
        assert control_folders(create=True) == []  # another user's folder is not taken either


def test_a_stale_file_of_a_dead_pid_is_removed_when_seen(folders: tuple[Path, Path], tmp_path: Path) -> None:
    runtime, _ = folders
    config = tmp_path / "g.toml"
    child = subprocess.Popen(["true"])
    child.wait()
    stale = ControlFiles(runtime, config_key(config), child.pid)
    stale.pid_path.write_bytes(orjson.dumps({"pid": child.pid, "start": 1, "config": str(config)}))
    stale.pid_path.chmod(0o600)
    assert find_peers(config) == []
    assert not stale.pid_path.exists()


def test_a_pid_file_of_this_process_is_refused_it_does_not_run_serve(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    config = tmp_path / "g.toml"
    files = ControlFiles.claim(config)
    assert files is not None
    try:
        (peer,) = find_peers(config)
        assert peer.pid == os.getpid() and peer.problem == "it is not an mcp-gateway serve process"
        assert signal_peer(peer, signal.SIGHUP) == "it is not an mcp-gateway serve process"
    finally:
        files.release()


def test_a_pid_file_another_user_could_write_is_not_read(folders: tuple[Path, Path], tmp_path: Path) -> None:
    runtime, _ = folders
    config = tmp_path / "g.toml"
    planted = ControlFiles(runtime, config_key(config), os.getpid())
    planted.pid_path.write_bytes(orjson.dumps({"pid": os.getpid()}))
    planted.pid_path.chmod(0o666)
    (peer,) = find_peers(config)
    assert peer.problem is not None and "not one a gateway wrote" in peer.problem


@pytest.mark.parametrize(
    ("argv", "serves"),
    [
        (["/venv/bin/python3", "/venv/bin/mcp-gateway", "serve", "--stdio"], True),
        (["mcp-gateway", "serve"], True),
        ([sys.executable, "-m", "actors", "serve", "--config", "g.toml"], True),
        (["python3.11", "-X", "dev", "-u", "-m", "actors", "serve"], True),
        (["/venv/bin/python3", "/venv/bin/mcp-gateway", "reload"], False),
        (["python3", "-m", "actors", "status"], False),
        (["python3", "evil.py", "-m", "actors", "serve"], False),
        (["sleep", "60"], False),
        (["/tmp/mcp-gateway-serve"], False),
        ([], False),
    ],
)
def test_which_command_lines_are_a_gateway_serving(argv: list[str], serves: bool) -> None:
    assert is_serve_command(argv) is serves


def test_a_forged_outcome_with_terminal_escapes_is_printed_escaped(
    folders: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime, _ = folders
    files = ControlFiles(runtime, config_key(tmp_path / "g.toml"), 4242)
    forged = {"serial": 2, "pid": 4242, "ok": True, "lines": ["\x1b]0;owned\x07\x1b[2Jadded x", 7]}
    files.outcome_path.write_bytes(orjson.dumps(forged))
    files.outcome_path.chmod(0o600)
    outcome = read_outcome(files)
    assert outcome is not None and outcome.lines == ("\x1b]0;owned\x07\x1b[2Jadded x", "7")
    assert await_outcomes([(Peer(4242, files), 1)], 1.0) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines() == ["\\x1b]0;owned\\x07\\x1b[2Jadded x", "7"]


def test_an_outcome_that_is_not_well_formed_is_not_taken(folders: tuple[Path, Path], tmp_path: Path) -> None:
    runtime, _ = folders
    files = ControlFiles(runtime, config_key(tmp_path / "g.toml"), 4242)
    for record in (
        {"serial": True, "pid": 4242, "ok": True, "lines": []},
        {"serial": 1, "pid": 1, "ok": True, "lines": []},
        {"serial": 1, "pid": 4242, "ok": "yes", "lines": []},
        [1, 2],
    ):
        files.outcome_path.write_bytes(orjson.dumps(record))
        files.outcome_path.chmod(0o600)
        assert read_outcome(files) is None
    files.outcome_path.unlink()
    os.mkfifo(files.outcome_path, 0o600)  # a FIFO: never blocks the reader
    assert read_outcome(files) is None
