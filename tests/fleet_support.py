"""What the fleet tier's tests and scripts/fleet share: free ports and a real redis-server process."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path
from typing import IO


class RedisUnavailableError(Exception):
    """redis-server did not start: its exit code and last lines."""


def free_port() -> int:
    """A port free on loopback now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """A redis-server on a free loopback port, nothing saved to disk; stop() and start() again on the same
    port (for the tests of a Redis that goes away and comes back)."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary, self.folder, self.port = binary, folder, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and return once it says it accepts connections (its own log line, read as it comes)."""
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--loglevel",
            "notice",
        ]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.process.stdout is not None
        seen = []
        for line in self.process.stdout:  # ends when it exits; a redis that neither starts nor exits hangs
            seen.append(line.decode(errors="replace").strip())
            if b"Ready to accept connections" in line:
                threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
                return
        code = self.process.wait()
        raise RedisUnavailableError(f"redis-server exited {code} on port {self.port}: {seen[-3:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    @staticmethod
    def _drain(stdout: IO[bytes]) -> None:
        """Its later log lines read and dropped, so a full pipe never stops it."""
        for _ in stdout:
            pass
