"""The log sink redacts (runtime/log.py with runtime/redact.py): a secret the gateway knows, or text shaped
like a credential, never reaches stderr or the log file, in the text or the JSON format, whether it came in
the message, the `[..]` context, an exception's traceback or a line `report` prints."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from actors.runtime.log import configure_logging, report
from actors.runtime.redact import REDACTOR
from actors.runtime.supervisor import ChildExitError, describe

SECRET = "log-secret-c4ca4238a0b9"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlX2hlcmU"
MARKER = "[REDACTED:env:LOG_SECRET]"


@pytest.fixture
def known() -> Iterator[None]:
    """SECRET known to the process's redactor; loguru's default handler back after the test."""
    REDACTOR.know("test-log", {"env:LOG_SECRET": SECRET})
    try:
        yield
    finally:
        REDACTOR.know("test-log", {})
        configure_logging()
        logger.remove()
        logger.configure(patcher=None)  # type: ignore[arg-type]
        logger.add(sys.stderr)


def log_everything() -> None:
    logger.info("connecting with {}", SECRET)
    with logger.contextualize(backend=f"b-{SECRET}", session=JWT):
        logger.warning("Authorization: Bearer {}", "0123456789abcdef")
    try:
        raise RuntimeError(f"cannot reach postgresql://gw:{SECRET}@db/audit")
    except RuntimeError:
        logger.opt(exception=True).error("the audit failed")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_secret_reaches_stderr_or_the_file(
    known: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], log_format: str
) -> None:
    file = tmp_path / "gateway.log"
    configure_logging("DEBUG", str(file), log_format)
    log_everything()
    report(f"mcp-gateway: cannot start: {SECRET}")
    for text in (capsys.readouterr().err, file.read_text()):
        assert SECRET not in text and JWT not in text and "0123456789abcdef" not in text
        assert text.count(MARKER) >= 3 and "[REDACTED:jwt]" in text and "Bearer [REDACTED:bearer]" in text
        assert "RuntimeError: cannot reach postgresql://gw:[REDACTED:env:LOG_SECRET]@db/audit" in text
        assert "Traceback (most recent call last)" in text  # the traceback is kept, redacted
        if log_format == "json":
            assert all(json.loads(line) for line in text.splitlines())


def test_a_childs_exit_reason_and_stderr_are_redacted_where_they_are_made(known: None) -> None:
    """What the catalog tells clients and the status page: a crashed backend's reason and last stderr."""
    error = ChildExitError(f"exited: {SECRET}", f"stderr {SECRET}")
    assert (error.without_stderr, error.stderr) == (f"exited: {MARKER}", f"stderr {MARKER}")
    assert SECRET not in str(error)
    assert describe(ExceptionGroup("run", [ValueError(SECRET)])) == f"ValueError: {MARKER}"


def test_a_token_minted_at_run_time_is_redacted_from_the_next_line_on(
    known: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the outbound auth piece's broker does with each token it obtains: REDACTOR.mint."""
    token = "opaque-" + "x1Y2z3" * 8
    configure_logging("DEBUG", str(tmp_path / "gateway.log"))
    REDACTOR.mint("token:tickets", token, expires_at=time.time() + 60)
    logger.info("exchanged: {}", token)
    text = capsys.readouterr().err + (tmp_path / "gateway.log").read_text()
    assert token not in text and text.count("exchanged: [REDACTED:token:tickets]") == 2
