"""A backend's stderr is redacted where it is read (backends/process.py): the lines the gateway logs and the
tail it keeps (for the status page and, with expose_backend_stderr, clients' errors) never hold a secret
the gateway knows, even the one it handed that backend."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from actors.backends.process import ProcessTransport, backend_environment
from actors.runtime.redact import REDACTOR

SECRET = "stderr-secret-c9f0f895fb98"


async def test_stderr_lines_are_redacted_before_they_are_logged_or_kept(tmp_path: Path) -> None:
    REDACTOR.know("test-stderr", {"env:STDERR_SECRET": SECRET})
    logged: list[str] = []
    env = backend_environment({"API_TOKEN": SECRET})
    script = 'echo "starting with $API_TOKEN" >&2; echo "Authorization: Bearer 0123456789abcdef" >&2'
    try:
        transport = await ProcessTransport.spawn(
            ["sh", "-c", script], cwd=tmp_path, env=env, max_bytes=1 << 16
        )
        try:
            with trio.fail_after(30):
                await transport.drain_stderr(logged.append)
        finally:
            await transport.stop(close_wait_s=1.0, term_wait_s=1.0)
    finally:
        REDACTOR.know("test-stderr", {})
    expected = ["starting with [REDACTED:env:STDERR_SECRET]", "Authorization: Bearer [REDACTED:bearer]"]
    assert logged == expected and list(transport.stderr_tail) == expected
    assert SECRET not in transport.last_stderr() and os.environ.get("API_TOKEN") != SECRET
