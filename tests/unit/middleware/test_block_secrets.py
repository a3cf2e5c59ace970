"""[gateway] block_secrets (middleware/block_secrets.py): a secret the gateway knows, in a call's arguments or
its result, is logged ("warn") or refused and withheld ("block"); the log and the audit row name the secret,
never its value; credential shapes alone are let through; "off" adds no middleware at all."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import captured_logs

from actors.config import load_config
from actors.config.schema import BlockSecrets
from actors.middleware.audit import make_record
from actors.middleware.base import CallOutcome, ClientInfo, ToolCall
from actors.middleware.block_secrets import SecretBlocker
from actors.middleware.chain import MiddlewareChain
from actors.middleware.loading import build_middleware
from actors.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from actors.protocol.messages import ErrorResponse, Message, Response
from actors.runtime.redact import Redactor

SECRET = 'block-"secret"-a87ff679a2f3'  # a quote in it: found as JSON writes it too


@pytest.fixture
def logs() -> Iterator[list[str]]:
    with captured_logs() as lines:
        yield lines


def blocker(mode: BlockSecrets) -> SecretBlocker:
    redactor = Redactor()
    redactor.know("config", {"env:BLOCK_SECRET": SECRET})
    return SecretBlocker(mode, redactor)


def a_call(arguments: Any) -> ToolCall:
    return ToolCall(ClientInfo("s1", "alice", "c"), "lookup", "notes", "lookup", arguments, time.time())


async def through(middleware: SecretBlocker, call: ToolCall, answer: Any) -> Message:
    async def forward(_: ToolCall) -> Message:
        return Response(1, answer)

    return await MiddlewareChain([middleware], call.client).call(1, call, forward)


async def test_block_refuses_arguments_and_withholds_results_naming_the_rule(logs: list[str]) -> None:
    sent = a_call({"q": {"nested": [f"x {SECRET} y"]}})
    refused = await through(blocker(BlockSecrets.BLOCK), sent, {"content": []})
    assert isinstance(refused, ErrorResponse) and refused.error.code == INVALID_PARAMS
    assert "block_secrets" in refused.error.message and SECRET not in repr(refused)
    assert (sent.decision, sent.rule) == ("deny", "block_secrets: arguments hold env:BLOCK_SECRET")

    answered = a_call({"q": "fine"})
    result = {"content": [{"type": "text", "text": f"the key is {SECRET}"}], "isError": True}
    withheld = await through(blocker(BlockSecrets.BLOCK), answered, result)
    assert isinstance(withheld, ErrorResponse) and withheld.error.code == INTERNAL_ERROR
    assert SECRET not in repr(withheld) and answered.rule == "block_secrets: result holds env:BLOCK_SECRET"
    record = make_record(answered, CallOutcome(error=withheld.error), False)
    assert record[8] == "error" and record[16:18] == ("deny", "block_secrets: result holds env:BLOCK_SECRET")
    assert len(logs) == 2 and all("env:BLOCK_SECRET" in line and SECRET not in line for line in logs)


async def test_warn_lets_the_call_through_and_says_so(logs: list[str]) -> None:
    sent = a_call({"q": SECRET})
    sent.rule, sent.decision = "rules[0]", "allow"  # what the policy decided stays
    result = {"content": [{"type": "text", "text": SECRET}]}
    answer = await through(blocker(BlockSecrets.WARN), sent, result)
    assert isinstance(answer, Response) and answer.result == result
    assert sent.decision == "allow"
    found = "block_secrets: arguments hold env:BLOCK_SECRET; block_secrets: result holds env:BLOCK_SECRET"
    assert sent.rule == f"rules[0]; {found}"
    assert [line.split(": ", 1)[1] for line in logs] == [
        "its arguments hold the secret env:BLOCK_SECRET; let through (block_secrets = warn)",
        "its result holds the secret env:BLOCK_SECRET; let through (block_secrets = warn)",
    ]


async def test_what_the_gateway_does_not_know_goes_through(logs: list[str]) -> None:
    middleware = blocker(BlockSecrets.BLOCK)
    shaped = {"token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln", "aws": "AKIAIOSFODNN7EXAMPLE"}
    answer = await through(middleware, a_call(shaped), {"content": [], "structuredContent": shaped})
    assert isinstance(answer, Response) and logs == []
    # arguments no JSON can hold (an integer past 64 bits) are searched string by string
    huge = a_call({"n": 1 << 70, "s": [SECRET]})
    assert isinstance(await through(middleware, huge, {"content": []}), ErrorResponse)


def test_off_adds_no_middleware_and_block_comes_after_the_audit(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    backend = '[[backends]]\nname = "a"\ncommand = "python3"\n'
    path.write_text(backend)
    assert build_middleware(load_config(path)) == ()
    path.write_text(f'[gateway]\nblock_secrets = "block"\n[audit]\npath = "a.sqlite3"\n{backend}')
    made = build_middleware(load_config(path))
    assert [type(each).__name__ for each in made] == ["AuditMiddleware", "SecretBlocker"]
    path.write_text(f'[gateway]\nblock_secrets = "yes"\n{backend}')
    with pytest.raises(Exception, match="'yes' is not one of 'off', 'warn', 'block'"):
        load_config(path)
