"""What the trust tests share: a gateway config running the rug-pull backend (tests/backends/rugpull.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

from support import ROOT, toml_value

RUGPULL: Final = ROOT / "tests" / "backends" / "rugpull.py"


def rugpull_config(tmp_path: Path, *flags: str, trust: str = "pin", **gateway: Any) -> Path:
    """A gateway of the rug-pull backend (its state in tmp_path), its trust and baselines in tmp_path."""
    args = [str(RUGPULL), "--state-file", str(tmp_path / "rugpull.json"), *flags]
    lines = [
        "[gateway]",
        *(f"{key} = {toml_value(value)}" for key, value in gateway.items()),
        "[trust]",
        f"mode = {toml_value(trust)}",
        f"path = {toml_value(str(tmp_path / 'trust.sqlite3'))}",
        "[[backends]]",
        'name = "rugpull"',
        f"command = {toml_value(sys.executable)}",
        f"args = {toml_value(args)}",
        "[backends.restart]",
        "backoff_initial_s = 0.05",
        "backoff_max_s = 0.2",
        "[backends.health]",
        "interval_s = 0",
    ]
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
