"""Interop (#36): the official TypeScript SDK clients answer the gateway's approval questions, over stdio to a
gateway process: the v2 client pinned to 2026-07-28 (an input_required round, which its client drives) and
the v1 client of the handshake era (a real elicitation/create). Accepted runs, declined never reaches the
backend (its record says so), and "for this session" covers the next call unasked.

The `node` fixture (conftest.py) installs the npm packages once."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import orjson
import pytest
import trio
from support import ROOT, backend_entry, gateway_argv, write_config

CLIENT: Final = ROOT / "tests" / "interop" / "ts_approval_client.mjs"
RUN_DEADLINE_S: Final = 60.0


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_the_typescript_sdk_clients_answer_the_gateways_approval_questions(
    tmp_path: Path, node: Path, era: str
) -> None:
    record = tmp_path / "calls.jsonl"
    backend = backend_entry("alpha", "--only=echo", "--destructive", "--record-calls", str(record))
    config = write_config(tmp_path / "g.toml", [backend])
    config.write_text(config.read_text() + "[policy]\napprove_destructive = true\n")
    argv = [str(node), str(CLIENT), era, *gateway_argv(config, tmp_path / "g.log")]
    with trio.fail_after(RUN_DEADLINE_S):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"node exited {done.returncode}\nstderr:\n{stderr}\nstdout:\n{stdout}"
    (line,) = stdout.splitlines()
    report = orjson.loads(line)
    assert [call["isError"] for call in report["calls"]] == [False, True, False, False]
    texts = [call["text"] for call in report["calls"]]
    assert texts[0] == "deleted 1" and texts[2:] == ["deleted 3", "deleted 4"]
    assert "The user declined this call of the tool 'delete_item'" in texts[1]
    assert len(report["questions"]) == 3  # the fourth call ran on the third's "for this session"
    assert all("'delete_item' of backend 'alpha'" in question for question in report["questions"])
    arrived = [orjson.loads(entry)["arguments"]["id"] for entry in record.read_bytes().splitlines()]
    assert arrived == ["1", "3", "4"]
