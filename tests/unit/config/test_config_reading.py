"""A config path is read only when it is a regular file, and only up to MAX_CONFIG_BYTES: a FIFO would block
the gateway on its open, /dev/zero would be read until memory runs out (issue #25)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import backend_entry, write_config

from actors.config import load_config
from actors.config.errors import ConfigError
from actors.config.load import MAX_CONFIG_BYTES


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    (problem,) = refused.value.problems
    assert problem.file == str(path) and problem.key == ""
    return problem.reason


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "gateway.toml"
    os.mkfifo(fifo)
    assert refusal(fifo).startswith("not a regular file")


def test_a_device_is_refused_unread(tmp_path: Path) -> None:
    zeros = tmp_path / "gateway.toml"
    zeros.symlink_to("/dev/zero")
    assert refusal(zeros).startswith("not a regular file")


def test_a_file_past_the_cap_is_refused(tmp_path: Path) -> None:
    huge = tmp_path / "gateway.toml"
    huge.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1) + b"\n")
    assert refusal(huge) == f"larger than {MAX_CONFIG_BYTES} bytes; not read"


def test_a_file_at_the_cap_is_read(tmp_path: Path) -> None:
    at_cap = write_config(tmp_path / "gateway.toml", [backend_entry("alpha")], name="capped")
    text = at_cap.read_bytes()
    at_cap.write_bytes(text + b"#" * (MAX_CONFIG_BYTES - len(text) - 1) + b"\n")
    assert at_cap.stat().st_size == MAX_CONFIG_BYTES
    assert load_config(at_cap).gateway.name == "capped"


def test_a_directory_is_still_named_as_one(tmp_path: Path) -> None:
    assert refusal(tmp_path) == "is a directory, not a TOML file"
