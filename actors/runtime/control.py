"""Where `mcp-gateway reload` finds the gateway serving a config, and what its last reload did.

`serve` writes its pid to a file named after the config file's absolute path, in $XDG_RUNTIME_DIR (or the
temp folder), and after each reload the outcome beside it, as JSON with a serial number. The command
checks the file itself first, sends SIGHUP to that pid and waits for the next serial. Both files are the
user's alone (0600) and removed when the gateway ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import attrs
import orjson

from actors.reload import ReloadOutcome


def runtime_folder() -> Path:
    return Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())


@attrs.define
class ControlFiles:
    pid_path: Path
    outcome_path: Path
    serial: int = 0

    @classmethod
    def for_config(cls, config_path: Path) -> ControlFiles:
        key = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:16]
        folder = runtime_folder()
        return cls(folder / f"mcp-gateway-{key}.pid", folder / f"mcp-gateway-{key}.reload.json")

    def claim(self) -> None:
        """This process serves the config now."""
        _write(self.pid_path, str(os.getpid()).encode())
        with contextlib.suppress(OSError):
            self.outcome_path.unlink()

    def release(self) -> None:
        for path in (self.pid_path, self.outcome_path):
            with contextlib.suppress(OSError):
                if path is self.outcome_path or path.read_text().strip() == str(os.getpid()):
                    path.unlink()

    def tell(self, outcome: ReloadOutcome) -> None:
        self.serial += 1
        record = {"serial": self.serial, "pid": os.getpid(), "ok": outcome.ok, "lines": list(outcome.lines)}
        with contextlib.suppress(OSError):
            _write(self.outcome_path, orjson.dumps(record))

    def running_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def last_outcome(self) -> dict[str, Any] | None:
        try:
            record = orjson.loads(self.outcome_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return record if isinstance(record, dict) else None


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all (a reader never sees half), readable by its owner only."""
    partial = path.with_name(path.name + ".tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(data)
    os.replace(partial, path)
