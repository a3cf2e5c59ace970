"""`check` and a start look a backend's program up with the same function, so a command `check` refuses
is the one whose start fails, for the same reason, and the other backends still serve."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import backend_entry, write_config

from actors.cli import EXIT_CONFIG_ERROR, main


def test_a_start_fails_on_the_command_check_refuses_with_the_same_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "gone" / "server"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=echo"),
            {"name": "beta", "command": str(missing), "restart": {"policy": "temporary"}},
        ],
    )
    reason = f"{str(missing)!r} does not exist"
    assert main(["check", "--config", str(config)]) == EXIT_CONFIG_ERROR
    assert capsys.readouterr().err.splitlines() == [f"{config}: backends[1].command: {reason}"]
    assert main(["tools", "--config", str(config)]) == 1  # a backend did not start
    out = capsys.readouterr().out
    assert "echo" in out and "backend alpha: ready" in out
    (beta,) = [line for line in out.splitlines() if line.startswith("backend beta:")]
    assert f"command: {reason}" in beta
