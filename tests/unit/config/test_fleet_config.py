"""[fleet] as the operator writes it: the Redis URL and the fleet keys come from the environment or a file,
never the config itself; `check` names each problem as FILE: key: reason and never prints a key."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import load_config
from actors.config.diff import diff
from actors.config.resolve_fleet import MAKE_KEY, parse_keys

KEY_A: Final = "A" * 43  # 32 bytes as base64url
KEY_B: Final = "0f" * 32  # 32 bytes as hex
BACKEND: Final = f'[[backends]]\nname = "t"\ncommand = "{sys.executable}"\n'


def config(tmp_path: Path, fleet: str) -> Path:
    path = tmp_path / "g.toml"
    path.write_text(f"{BACKEND}\n[fleet]\n{fleet}\n")
    return path


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", "--config", str(path)])
    return code, capsys.readouterr().err


def test_fleet_keys_from_a_variable_first_seals_and_url_and_keys_never_repr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_KEYS", f"{KEY_A}, {KEY_B}")
    monkeypatch.setenv("FLEET_URL", "redis://:hunter2@127.0.0.1:6379/0")
    loaded = load_config(
        config(tmp_path, 'redis_url_env = "FLEET_URL"\nkeys_env = "FLEET_KEYS"\nreplica = "r1"')
    )
    assert loaded.fleet is not None
    assert loaded.fleet.keys == (b"\x00" * 32, bytes.fromhex(KEY_B))
    assert loaded.fleet.replica == "r1"
    assert "hunter2" not in repr(loaded.fleet) and "FLEET_KEYS" in loaded.secret_variables()
    assert "FLEET_URL" in loaded.secret_variables()  # no backend inherits them


def test_fleet_keys_file_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "fleet.keys").write_text(f"# new key first\n{KEY_B}\n{KEY_A}  # the old one, still opening\n")
    loaded = load_config(config(tmp_path, 'redis_url = "redis://127.0.0.1:6379"\nkeys_file = "fleet.keys"'))
    assert loaded.fleet is not None and loaded.fleet.keys[0] == bytes.fromhex(KEY_B)
    assert loaded.fleet.replica  # unset: the host's name and the pid


@pytest.mark.parametrize(
    ("fleet", "environment", "expected"),
    [
        ('keys_env = "K"', {"K": KEY_A}, "fleet: set one of redis_url and redis_url_env"),
        ('redis_url = "http://x"\nkeys_env = "K"', {"K": KEY_A}, "fleet.redis_url: must start with redis://"),
        ('redis_url = "redis://h"', {}, "fleet: set one of keys_env and keys_file"),
        ('redis_url = "redis://h"\nkeys_env = "K"', {}, "fleet.keys_env: environment variable K is not set"),
        ('redis_url = "redis://h"\nkeys_env = "K"', {}, "make one with: python3 -c 'import secrets; print("),
        ('redis_url = "redis://h"\nkeys_env = "K"', {"K": f"{KEY_A} short"}, "key 2 of 2 is not 32 bytes"),
        ('redis_url = "redis://h"\nkeys_env = "K"', {"K": f"{KEY_A} {KEY_A}"}, "a key is listed twice"),
        (
            'redis_url = "redis://h"\nkeys_env = "K"\nreplica = "a b"',
            {"K": KEY_A},
            "fleet.replica: must be 1 to 32",
        ),
        ('redis_url = "redis://h"\nkeys_file = "none.keys"', {}, "fleet.keys_file: cannot read 'none.keys'"),
        ('redis_url = "redis://h"\nkeys_env = "K"\nsession_ttl_s = 1', {"K": KEY_A}, "fleet.session_ttl_s"),
    ],
)
def test_bad_fleet_table_names_file_key_and_reason_never_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fleet: str,
    environment: dict[str, str],
    expected: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = config(tmp_path, fleet)
    code, err = check(path, capsys)
    assert code == EXIT_CONFIG_ERROR
    assert f"{path}: " in err and expected in err, err
    assert KEY_A not in err and "Traceback" not in err


def test_audit_postgres_url_comes_from_its_variable_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g.toml"
    path.write_text(f'{BACKEND}\n[audit]\npostgres_url_env = "AUDIT_DB"\n')
    code, err = check(path, capsys)
    assert (
        code == EXIT_CONFIG_ERROR and f"{path}: audit.postgres_url_env: environment variable AUDIT_DB" in err
    )
    path.write_text(f'{BACKEND}\n[audit]\npostgres_url = "postgresql://u:pw@h/db"\n')
    code, err = check(path, capsys)
    assert (
        code == EXIT_CONFIG_ERROR and "audit.postgres_url: not read from the file" in err and "pw@" not in err
    )
    monkeypatch.setenv("AUDIT_DB", "postgresql://u:pw@h/db")
    path.write_text(f'{BACKEND}\n[audit]\npostgres_url_env = "AUDIT_DB"\n')
    loaded = load_config(path)
    assert loaded.audit is not None and loaded.audit.postgres_url == "postgresql://u:pw@h/db"
    assert "pw@" not in repr(loaded.audit) and "AUDIT_DB" in loaded.secret_variables()


def test_a_reload_that_changes_fleet_says_it_needs_a_restart(tmp_path: Path) -> None:
    (tmp_path / "k").write_text(KEY_A)
    old = load_config(config(tmp_path, 'redis_url = "redis://h"\nkeys_file = "k"\nreplica = "r1"'))
    new = load_config(config(tmp_path, 'redis_url = "redis://other"\nkeys_file = "k"\nreplica = "r1"'))
    assert diff(old, new).needs_restart == ("[fleet]",)
    assert diff(old, old).needs_restart == ()


def test_the_key_the_hint_makes_is_a_fleet_key() -> None:
    command = MAKE_KEY.split("make one with: ", 1)[1]
    made = subprocess.run(shlex.split(command), capture_output=True, text=True, check=True, timeout=30)
    problems: list[tuple[str, str]] = []
    keys = parse_keys(made.stdout, "fleet.keys_env", problems)
    assert problems == [] and keys is not None and len(keys[0]) == 32
