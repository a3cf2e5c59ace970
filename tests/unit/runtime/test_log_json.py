"""--log-format json: one valid JSON object per line on stderr and in the log file, with the text format's
context as fields, and no raw control character whatever a peer put in the message, the context or an
exception."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from actors.runtime.log import CONTROLS, configure_logging, escape_controls, report

HOSTILE = 'say "hi"\x1b[31m\r\n2026-01-01 00:00:00.000 ERROR   fake\x00\u2028end\x7f\x85\u202e\\'


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """loguru's default handler, unpatched, and the text format for `report`, after the test."""
    try:
        yield
    finally:
        configure_logging()
        logger.remove()
        logger.configure(patcher=None)  # type: ignore[arg-type]
        logger.add(sys.stderr)


def parsed(text: str) -> list[dict[str, Any]]:
    """Each line of `text` as a JSON object, checked to be one line free of control characters."""
    assert text.endswith("\n")
    records = []
    for line in text.removesuffix("\n").split("\n"):
        assert CONTROLS.search(line) is None, line
        record = json.loads(line)
        assert isinstance(record, dict)
        records.append(record)
    return records


def test_lines_are_json_objects_with_the_context(
    restore_logging: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "gateway.log"
    configure_logging("DEBUG", str(file), "json")
    logger.info("plain")
    with logger.contextualize(backend="notes", session="s\x1b]0;t\x07"):
        logger.warning("refused {}", HOSTILE)
    err = capsys.readouterr().err
    assert err == file.read_text(encoding="utf-8")
    first, second = parsed(err)
    assert first["level"] == "INFO" and first["message"] == "plain" and first["time"].startswith("20")
    assert "backend" not in first and first["logger"] == __name__
    assert second["level"] == "WARNING" and second["backend"] == "notes"
    assert second["session"] == "s\\x1b]0;t\\x07"
    assert second["message"] == f"refused {escape_controls(HOSTILE)}"  # the text format's message
    assert 'say "hi"' in second["message"] and second["message"].endswith("\\")


def test_an_exception_is_one_field_with_its_lines(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its line breaks stay line breaks inside the JSON string; every other control character is escaped."""
    configure_logging("INFO", None, "json")
    said = HOSTILE.replace("\n", "")
    try:
        raise ValueError(f"peer said {said}")
    except ValueError as exc:
        logger.opt(exception=exc).error("crashed")
    (record,) = parsed(capsys.readouterr().err)
    lines = record["exception"].split("\n")
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == f"ValueError: peer said {escape_controls(said)}"
    assert CONTROLS.search(record["exception"].replace("\n", "")) is None


def test_a_lone_surrogate_still_makes_a_line(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("INFO", None, "json")
    logger.info("bytes {}", b"\xff".decode("utf-8", "surrogateescape"))
    (record,) = parsed(capsys.readouterr().err)
    assert record["message"] == "bytes \\udcff"


def test_report_follows_the_format(restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", None, "text")
    report("gateway.toml: no such file")
    assert capsys.readouterr().err == "gateway.toml: no such file\n"
    configure_logging("INFO", None, "json")
    report("gateway.toml: no such file")
    (record,) = parsed(capsys.readouterr().err)
    assert record["level"] == "ERROR" and record["message"] == "gateway.toml: no such file"
