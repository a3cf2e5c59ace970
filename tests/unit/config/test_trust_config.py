"""[trust] and a backend's `trust` key: loaded, defaulted, explained when wrong, and compared at a reload."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actors.config import ConfigError, load_config
from actors.config.diff import diff
from actors.trust import TrustMode

ROOT = Path(__file__).resolve().parents[3]


def write(path: Path, text: str) -> Path:
    backends = f'[[backends]]\nname = "a"\ncommand = "{sys.executable}"\n'
    path.write_text(text + "\n" + backends, encoding="utf-8")
    return path


def test_the_default_is_off_with_the_store_beside_the_audit_or_the_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "g.toml", ""))
    assert config.trust_modes() == {"a": TrustMode.OFF} and config.trust.path == tmp_path / "trust.sqlite3"
    audited = load_config(write(tmp_path / "h.toml", '[audit]\npath = "logs/audit.sqlite3"'))
    assert audited.trust.path == tmp_path / "logs" / "trust.sqlite3"
    example = load_config(ROOT / "config" / "example.toml")
    assert example.trust.mode is TrustMode.OFF and example.trust.path == ROOT / "config" / "trust.sqlite3"


def test_a_backend_overrides_the_mode_and_the_path_is_relative_to_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", '[trust]\nmode = "pin"\npath = "state/t.db"')
    path.write_text(path.read_text() + 'trust = "manual"\n[[backends]]\nname = "b"\ncommand = "python3"\n')
    config = load_config(path)
    assert config.trust_modes() == {"a": TrustMode.MANUAL, "b": TrustMode.PIN}
    assert config.trust.path == tmp_path / "state" / "t.db"


def test_mistakes_name_the_file_the_key_and_the_reason(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    path = write(tmp_path / "g.toml", '[trust]\nmode = "pinned"\nfoo = 1')
    path.write_text(path.read_text() + "trust = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {problem.key: problem.reason for problem in caught.value.problems}
    assert problems["trust.mode"] == "'pinned' is not one of 'off', 'pin', 'scan', 'manual'"
    assert problems["trust.foo"].startswith("unknown key")
    assert problems["backends[0].trust"] == "expected a string, got an integer"
    assert all(str(problem).startswith(f"{path}: ") for problem in caught.value.problems)
    with pytest.raises(ConfigError) as folder:
        load_config(write(tmp_path / "h.toml", '[trust]\npath = "folder"'))
    (problem,) = folder.value.problems
    assert problem.key == "trust.path" and problem.reason.endswith("is a directory; name a file")


def test_a_reload_judges_again_a_new_mode_and_needs_a_restart_for_a_new_path(tmp_path: Path) -> None:
    before = load_config(write(tmp_path / "a.toml", '[trust]\nmode = "off"'))
    after = load_config(write(tmp_path / "b.toml", '[trust]\nmode = "pin"'))
    change = diff(before, after)
    assert change.catalog_changed and not change.changed and "[trust] path" not in change.needs_restart
    moved = load_config(write(tmp_path / "c.toml", '[trust]\nmode = "off"\npath = "elsewhere.db"'))
    assert "[trust] path" in diff(before, moved).needs_restart
