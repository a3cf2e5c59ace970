"""max_output_chars in the config: where it is written, what a bad value is told (`FILE: key: reason`,
exit non-zero, no traceback), and what sessions get from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from actors.config import ConfigError, load_config
from actors.config.diff import diff
from actors.output.settings import OutputLimits

BACKEND = '[[backends]]\nname = "a"\ncommand = "python"\n'


def test_the_gateways_and_each_tools_limits_are_loaded(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"[gateway]\nmax_output_chars = 20000\n{BACKEND}"
        "[backends.tools]\nmax_output_chars = { dump = 90000 }\n"
        '[[backends]]\nname = "b"\ncommand = "python"\n',
        encoding="utf-8",
    )
    assert load_config(path).output_limits() == OutputLimits(20_000, {"a": {"dump": 90_000}})


def test_without_the_keys_nothing_is_limited(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(BACKEND, encoding="utf-8")
    assert load_config(path).output_limits() == OutputLimits()


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("[gateway]\nmax_output_chars = 10\n", "gateway.max_output_chars", "must be from 1000 to 1000000000"),
        ("[gateway]\nmax_output_chars = 10000000000\n", "gateway.max_output_chars", "must be from 1000"),
        (
            "[gateway]\nmax_output_chars = true\n",
            "gateway.max_output_chars",
            "expected an integer, got a boolean",
        ),
        ("[gateway]\nmax_output_chars = 2.5\n", "gateway.max_output_chars", "expected an integer"),
        (
            f"{BACKEND}[backends.tools]\nmax_output_chars = {{ dump = 5 }}\n",
            "backends[0].tools.max_output_chars.dump",
            "must be from 1000",
        ),
        (
            f'{BACKEND}[backends.tools]\nmax_output_chars = {{ dump = "lots" }}\n',
            "backends[0].tools.max_output_chars",
            "dump: expected an integer, got a string",
        ),
        (
            f"{BACKEND}[backends.tools]\nmax_output_chars = 5000\n",
            "backends[0].tools.max_output_chars",
            "expected a table such as { read_file = 40000 }, got an integer",
        ),
    ],
)
def test_a_bad_limit_names_its_key_and_reason(tmp_path: Path, text: str, key: str, reason: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(text if "backends" in text else text + BACKEND, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {problem.key: problem.reason for problem in caught.value.problems}
    assert key in problems, problems
    assert reason in problems[key]


def test_check_prints_file_key_reason_and_exits_non_zero(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[gateway]\nmax_output_chars = 10\n{BACKEND}", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert f"{path}: gateway.max_output_chars: must be from 1000 to 1000000000 characters" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_reload_applies_new_limits_without_restarting_the_backend(tmp_path: Path) -> None:
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(BACKEND, encoding="utf-8")
    new.write_text(f"{BACKEND}[backends.tools]\nmax_output_chars = {{ dump = 90000 }}\n", encoding="utf-8")
    change = diff(load_config(old), load_config(new))
    assert change.changed == () and change.unchanged == ("a",)
    assert change.guards_changed == ("max_output_chars",) and not change.nothing
