"""Without a [fleet] table nothing of actors.fleet, nor coredis, is imported: the CLI, the gateway and a
loaded config are what they were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import sys, trio
from actors.config import load_config
from actors.gateway import Gateway
import actors.cli
Gateway(load_config(sys.argv[1]))
print(sorted(m for m in sys.modules if m.startswith(("coredis", "actors.fleet", "psycopg"))))
"""


def test_a_config_without_fleet_imports_neither_actors_fleet_nor_coredis() -> None:
    config = str(ROOT / "config" / "gateway.toml")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, config], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
