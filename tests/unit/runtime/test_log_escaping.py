"""Log lines are one line each, whatever text a peer chose: control characters come out escaped, in the
message and in the `[..]` context, on stderr and in the log file; tracebacks keep their lines."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger

from actors.frontends.http.listener import hypercorn_log as _hypercorn_log
from actors.runtime.log import FORMAT, configure_logging, escape_controls, escape_json_controls

HOSTILE = "GET /mcp\x1b[31m\r\n2026-01-01 00:00:00.000 ERROR   fake\x00\u2028end\x7f\x85\u202e"
ESCAPED = "GET /mcp\\x1b[31m\\x0d\\x0a2026-01-01 00:00:00.000 ERROR   fake\\x00\\u2028end\\x7f\\x85\\u202e"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """loguru's default handler, unpatched, after the test."""
    try:
        yield
    finally:
        logger.remove()
        logger.configure(patcher=None)  # type: ignore[arg-type]
        logger.add(sys.stderr)


def configure(file: Path) -> list[str]:
    """configure_logging with a file, plus a sink of the test's own. Called in the test's body: capsys
    replaces sys.stderr between a fixture's setup and the test."""
    lines: list[str] = []
    configure_logging("DEBUG", str(file))
    logger.add(lines.append, level="DEBUG", format=FORMAT)
    return lines


def test_escape_controls() -> None:
    plain = "plain text, ünïcödé, a \\ backslash"
    assert escape_controls(plain) is plain
    assert escape_controls(HOSTILE) == ESCAPED
    assert escape_controls("\t\u2029") == "\\x09\\u2029"
    # In JSON text the same characters become JSON escapes: the value is unchanged.
    assert escape_json_controls('{"a":"x\x7f\u2028"}') == '{"a":"x\\u007f\\u2028"}'


def test_a_peer_cannot_forge_log_lines(
    restore_logging: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "gateway.log"
    lines = configure(file)
    with logger.contextualize(session="s\x1b]0;title\x07", subject="a\nb"):
        logger.warning("refused {} from {}", HOSTILE, "peer")
    (line,) = lines
    assert line.endswith(f"[session=s\\x1b]0;title\\x07 subject=a\\x0ab] refused {ESCAPED} from peer\n")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(line.split(" ", 2)[2])
    written = file.read_text()
    assert written.count("\n") == 1 and written.endswith(line.split(" ", 2)[2])
    for text in (line, err, written):
        assert not any(c in text for c in "\x1b\r\x00\u2028\x7f\x85")


def test_tracebacks_keep_their_lines(restore_logging: None, tmp_path: Path) -> None:
    lines = configure(tmp_path / "gateway.log")
    try:
        raise ValueError("boom")
    except ValueError as exc:
        logger.opt(exception=exc).error("crashed on {}", "x\ny")
    (line,) = lines
    first, *rest = line.splitlines()
    assert first.endswith("crashed on x\\x0ay")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"


def test_hypercorn_lines_pass_the_same_patcher(restore_logging: None, tmp_path: Path) -> None:
    lines = configure(tmp_path / "gateway.log")
    _hypercorn_log().warning("bad request line %r", HOSTILE.encode("latin-1", "replace").decode("latin-1"))
    _hypercorn_log().info("%s", HOSTILE)
    assert len(lines) == 2 and all(line.count("\n") == 1 for line in lines)
    assert lines[1].endswith(f"http server: {ESCAPED}\n")
