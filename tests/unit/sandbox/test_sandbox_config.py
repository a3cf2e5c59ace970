"""[sandbox] and [backends.sandbox]: a backend's table over the top level key by key, the defaults (off), and
every bad value (wrong type, unknown word, huge number, control character, relative path, unknown user)
answered as `FILE: key: reason`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from actors.config import ConfigError, load_config
from actors.config.diff import diff
from actors.config.sandbox_schema import SandboxMode, SandboxNetwork, path_problem


def write(path: Path, top: str, own: str = "") -> Path:
    backend = f'[[backends]]\nname = "a"\ncommand = "{sys.executable}"\n'
    path.write_text(f'{top}\n{backend}{own}\n[[backends]]\nname = "r"\nurl = "ws://127.0.0.1:1/mcp"\n')
    return path


def test_off_by_default_and_a_backend_table_sets_only_its_keys(tmp_path: Path) -> None:
    plain = load_config(write(tmp_path / "a.toml", ""))
    settings = plain.sandbox_of(plain.backends[0])
    assert settings is not None and settings.mode is SandboxMode.OFF
    assert plain.sandbox_of(plain.backends[1]) is None  # a remote backend has no process to confine
    top = '[sandbox]\nmode = "auto"\nmemory_mb = 512\nread = ["{runtime}", "~/data"]'
    own = '[backends.sandbox]\nmode = "require"\nnetwork = "host"\n'
    merged = load_config(write(tmp_path / "b.toml", top, own))
    settings = merged.sandbox_of(merged.backends[0])
    assert settings is not None
    assert (settings.mode, settings.network, settings.memory_mb) == (
        SandboxMode.REQUIRE,
        SandboxNetwork.HOST,
        512,
    )
    assert settings.read == ("{runtime}", "~/data") and settings.write == ("{workdir}", "{tmp}")


def test_every_mistake_names_the_file_the_key_and_the_reason(tmp_path: Path) -> None:
    top = "\n".join(
        [
            "[sandbox]",
            'mode = "maybe"',
            'read = ["relative", "{home}/x", "/a\\u0001b", "~other/x", "/a/../b"]',
            "memory_mb = 99999999999",
            'user = "no-such-user-here"',
            'nofile = "many"',
        ]
    )
    own = '[backends.sandbox]\nnetwork = "wide"\ntasks = 0\nhide = "~/.ssh"\nwrite = ' + str(["/x"] * 65)
    path = write(tmp_path / "bad.toml", top, own)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {problem.key: problem.reason for problem in caught.value.problems}
    assert all(problem.file == str(path) for problem in caught.value.problems)
    assert problems["sandbox.mode"] == "'maybe' is not one of 'off', 'auto', 'require'"
    assert "must be absolute" in problems["sandbox.read[0]"]
    assert "unknown placeholder {home}" in problems["sandbox.read[1]"]
    assert "control character" in problems["sandbox.read[2]"]
    assert "~user" in problems["sandbox.read[3]"]
    assert ".." in problems["sandbox.read[4]"]
    assert problems["sandbox.memory_mb"] == "must be 1048576 or less"
    assert problems["sandbox.user"] == "'no-such-user-here': no such user on this machine"
    assert "sandbox.nofile" in problems
    assert problems["backends[0].sandbox.network"] == "'wide' is not one of 'none', 'host'"
    assert problems["backends[0].sandbox.tasks"] == "must be 1 or more"
    assert "array" in problems["backends[0].sandbox.hide"]
    assert problems["backends[0].sandbox.write"] == "at most 64 paths"


def test_a_reload_restarts_the_backends_whose_sandbox_changed(tmp_path: Path) -> None:
    old = load_config(write(tmp_path / "a.toml", ""))
    new = load_config(write(tmp_path / "b.toml", '[sandbox]\nmode = "auto"'))
    assert diff(old, new).changed == ("a",)  # the remote backend has no sandbox: left alone


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("{runtime}", True),
        ("{tmp}/cache", True),
        ("~", True),
        ("~/.ssh", True),
        ("/srv/data", True),
        ("/srv/{tmp}", False),
        ("{runtime}{tmp}", False),
        ("", False),
        ("/" + "a" * 5000, False),
        ("/x\x7f", False),
    ],
)
def test_path_rules(path: str, ok: bool) -> None:
    assert (path_problem(path) is None) is ok


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, tasks needs `user`: the case this checks")
def test_check_says_which_backend_would_not_start(tmp_path: Path) -> None:
    """`mcp-gateway check`: require that this machine cannot meet is a problem (the backend would stay down),
    auto a warning; both name the file, the backend's key and what is missing."""
    from actors.sandbox.advice import sandbox_advice

    config = load_config(write(tmp_path / "c.toml", '[sandbox]\nmode = "require"'))
    said = f"{config.path}: backends[0].sandbox: mode=require but this machine cannot enforce tasks"
    assert list(sandbox_advice(config)) == [(True, f"{said}; it would not start")]
    config = load_config(write(tmp_path / "d.toml", '[sandbox]\nmode = "auto"\nuser = "nobody"'))
    assert list(sandbox_advice(config)) == []  # a uid of its own: tasks enforced too
