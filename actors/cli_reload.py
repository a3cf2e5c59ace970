"""`mcp-gateway reload --config F`: check F whole, then have the gateway serving F load it again, and say
what it applied (runtime/control.py finds that gateway; reload.py does the work)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Final

from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.runtime.control import ControlFiles

EXIT_REFUSED: Final = 2  # the file has problems (here, or as the gateway loaded it)
EXIT_NO_GATEWAY: Final = 1
POLL_S: Final = 0.1


def reload_command(config_path: str, timeout_s: float) -> int:
    try:
        load_config(config_path)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print("mcp-gateway: not reloaded: the running gateway keeps its config", file=sys.stderr)
        return EXIT_REFUSED
    control = ControlFiles.for_config(Path(config_path))
    pid = control.running_pid()
    if pid is None or not _serves(pid):
        print(f"mcp-gateway: no gateway is serving {config_path}", file=sys.stderr)
        return EXIT_NO_GATEWAY
    before = (control.last_outcome() or {}).get("serial", 0)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        print(
            f"mcp-gateway: cannot reach the gateway serving {config_path} (pid {pid}): {exc}", file=sys.stderr
        )
        return EXIT_NO_GATEWAY
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        outcome = control.last_outcome()
        if outcome is not None and outcome.get("pid") == pid and outcome.get("serial", 0) > before:
            stream = sys.stdout if outcome.get("ok") else sys.stderr
            for line in outcome.get("lines", []):
                print(line, file=stream)
            return 0 if outcome.get("ok") else EXIT_REFUSED
        time.sleep(POLL_S)
    print(
        f"mcp-gateway: asked pid {pid} to reload; no outcome within {timeout_s}s (see its log)",
        file=sys.stderr,
    )
    return EXIT_NO_GATEWAY


def _serves(pid: int) -> bool:
    """The pid is a running gateway (not a stale file's pid given to another program since)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in command
