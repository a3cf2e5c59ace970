"""Approval before side effects (#36): the official SDK 2.x client over real stdio, in both eras, answers the
gateway's question with its elicitation callback; a real test backend records every tools/call it gets, so
a call that was declined, expired or could not be asked is proven never to have arrived.

A legacy client is asked with a real elicitation/create during its call; a 2026-07-28 client gets an
input_required round and retries (the SDK drives the round itself). Replays and forged answers go raw."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import orjson
import pytest
import trio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.shared.exceptions import MCPError
from sdk_websocket import websocket_client
from support import (
    ROOT,
    SESSION_DEADLINE_S,
    backend_entry,
    raw_gateway,
    running,
    sdk_client,
    with_http,
    with_websocket,
    write_config,
)

from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY
from actors.session.approval_asks import APPROVAL_KEY, FOR_SESSION
from actors.session.approvals import META_KEY

MODERN: Final = "2026-07-28"
LEGACY: Final = "legacy"
ERAS: Final = pytest.mark.parametrize("era", [MODERN, LEGACY])
DESTRUCTIVE: Final = "[policy]\napprove_destructive = true\n"
ROUNDS_BACKEND: Final = ROOT / "tests" / "backends" / "sdk_rounds.py"  # a modern backend that asks twice
Elicit = Callable[[ClientRequestContext, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


def config_with(tmp_path: Path, policy: str = DESTRUCTIVE, extra: str = "") -> Path:
    """alpha: echo, and delete_item (marked destructive), recording what reaches it."""
    record = tmp_path / "calls.jsonl"
    backend = backend_entry("alpha", "--only=echo", "--destructive", "--record-calls", str(record))
    config = write_config(tmp_path / "g.toml", [backend])
    config.write_text(config.read_text() + "\n" + policy + extra)
    return config


def arrived(tmp_path: Path) -> list[dict[str, Any]]:
    """Every tools/call the backend received, in order."""
    path = tmp_path / "calls.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def answering(*actions: str, asked: list[types.ElicitRequestParams], **content: Any) -> Elicit:
    """An elicitation callback giving `actions` in turn (`content` with an accept), noting each question."""
    given = iter(actions)

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        action = next(given)
        return types.ElicitResult(action=action, content=content if action == "accept" else None)  # type: ignore[arg-type]

    return elicit


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content)  # type: ignore[union-attr]


@ERAS
async def test_an_accepted_call_runs_and_a_declined_one_never_reaches_the_backend(
    tmp_path: Path, era: str
) -> None:
    config = config_with(tmp_path)
    asked: list[types.ElicitRequestParams] = []
    callback = answering("accept", "decline", "cancel", asked=asked)
    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=callback) as client:
        accepted = await client.call_tool("delete_item", {"id": "7"})
        declined = await client.call_tool("delete_item", {"id": "8"})
        dismissed = await client.call_tool("delete_item", {"id": "9"})
        unasked = await client.call_tool("echo", {"text": "not destructive"})
    assert not accepted.is_error and text_of(accepted) == "deleted 7"
    assert declined.is_error and "The user declined this call of the tool 'delete_item'" in text_of(declined)
    assert "approve_destructive" in text_of(declined)
    assert declined.meta is not None and declined.meta[META_KEY] == {
        "outcome": "declined",
        "rule": "approve_destructive",
    }
    assert dismissed.is_error and "dismissed" in text_of(dismissed)
    assert text_of(unasked) == "not destructive"
    assert [call["arguments"] for call in arrived(tmp_path)] == [{"id": "7"}, {"text": "not destructive"}]
    # the user was asked each destructive call, shown the backend, the tool and the arguments
    assert len(asked) == 3
    assert "'delete_item' of backend 'alpha'" in asked[0].message and '{"id":"7"}' in asked[0].message
    assert '{"id":"8"}' in asked[1].message


@ERAS
async def test_an_approval_for_this_session_covers_the_tool_with_any_arguments(
    tmp_path: Path, era: str
) -> None:
    config = config_with(tmp_path)
    asked: list[types.ElicitRequestParams] = []
    callback = answering("accept", asked=asked, **{FOR_SESSION: True})
    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=callback) as client:
        first = await client.call_tool("delete_item", {"id": "1"})
        second = await client.call_tool("delete_item", {"id": "2"})
    assert [text_of(first), text_of(second)] == ["deleted 1", "deleted 2"]
    assert len(asked) == 1  # the second call ran on the session's approval
    schema = asked[0].requested_schema  # type: ignore[union-attr]
    assert schema["properties"][FOR_SESSION]["type"] == "boolean"
    asked_again: list[types.ElicitRequestParams] = []
    declining = answering("decline", asked=asked_again)
    async with sdk_client(config, tmp_path / "g2.log", mode=era, elicitation_callback=declining) as client:
        assert (await client.call_tool("delete_item", {"id": "3"})).is_error
    assert len(asked_again) == 1  # a new session is asked again: the approval ended with its session
    assert [call["arguments"]["id"] for call in arrived(tmp_path)] == ["1", "2"]


@ERAS
async def test_an_unanswered_question_expires_and_the_call_never_runs(tmp_path: Path, era: str) -> None:
    ttl_s = 1.0
    config = config_with(tmp_path, DESTRUCTIVE + f"approval_ttl_s = {ttl_s}\n")
    withdrawn = trio.Event()

    async def too_late(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        if era == LEGACY:  # the gateway withdraws the question (notifications/cancelled): this is cancelled
            try:
                await trio.sleep_forever()
            finally:
                withdrawn.set()
        await trio.sleep(ttl_s + 0.5)  # the modern answer comes back after its state's expiry, certainly
        return types.ElicitResult(action="accept", content={})

    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=too_late) as client:
        expired = await client.call_tool("delete_item", {"id": "7"})
        if era == LEGACY:
            with trio.fail_after(10):
                await withdrawn.wait()
        after = await client.call_tool("echo", {"text": "still here"})
    assert expired.is_error and "did not approve this call of the tool 'delete_item' in time" in text_of(
        expired
    )
    assert expired.meta is not None and expired.meta[META_KEY]["outcome"] == "expired"
    assert text_of(after) == "still here"
    assert [call["name"] for call in arrived(tmp_path)] == ["echo"]


@ERAS
async def test_a_client_that_cannot_be_asked_is_refused_naming_the_rule(tmp_path: Path, era: str) -> None:
    config = config_with(tmp_path)
    async with sdk_client(config, tmp_path / "g.log", mode=era) as client:  # no elicitation callback
        refused = await client.call_tool("delete_item", {"id": "7"})
    assert refused.is_error
    text = text_of(refused)
    assert "needs the user's approval" in text and "approve_destructive" in text
    assert "did not declare the elicitation capability" in text
    assert refused.meta is not None and refused.meta[META_KEY]["outcome"] == "unasked"
    assert arrived(tmp_path) == []


@ERAS
async def test_when_unasked_allow_runs_the_call_of_a_client_that_cannot_be_asked(
    tmp_path: Path, era: str
) -> None:
    config = config_with(tmp_path, DESTRUCTIVE + 'when_unasked = "allow"\n')
    async with sdk_client(config, tmp_path / "g.log", mode=era) as client:
        ran = await client.call_tool("delete_item", {"id": "7"})
    assert text_of(ran) == "deleted 7"
    assert [call["name"] for call in arrived(tmp_path)] == ["delete_item"]


APPROVE_BY_ARGUMENTS: Final = """[policy]
[[policy.rules]]
name = "echo-rm"
effect = "approve"
when = 'mcp.tool.name == "echo" && has(mcp.tool.arguments.text) && mcp.tool.arguments.text.startsWith("rm ")'
"""


@ERAS
async def test_an_approve_rule_reads_the_arguments(tmp_path: Path, era: str) -> None:
    config = config_with(tmp_path, APPROVE_BY_ARGUMENTS)
    asked: list[types.ElicitRequestParams] = []
    callback = answering("decline", asked=asked)
    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=callback) as client:
        plain = await client.call_tool("echo", {"text": "ls"})
        risky = await client.call_tool("echo", {"text": "rm -rf /"})
        destructive = await client.call_tool("delete_item", {"id": "1"})  # no approve_destructive here
    assert text_of(plain) == "ls" and text_of(destructive) == "deleted 1"
    assert risky.is_error and "echo-rm" in text_of(risky)
    assert len(asked) == 1 and "echo-rm" in asked[0].message
    assert [call["arguments"] for call in arrived(tmp_path)] == [{"text": "ls"}, {"id": "1"}]


@ERAS
async def test_every_question_and_answer_is_an_audit_row_without_argument_values(
    tmp_path: Path, era: str
) -> None:
    audit = tmp_path / "audit.sqlite3"
    config = config_with(tmp_path, extra=f'[audit]\npath = "{audit}"\n')
    callback = answering("accept", "decline", asked=[])
    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=callback) as client:
        assert text_of(await client.call_tool("delete_item", {"id": "secret-1"})) == "deleted secret-1"
        assert (await client.call_tool("delete_item", {"id": "secret-2"})).is_error
    with sqlite3.connect(audit) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM calls WHERE tool = 'delete_item' ORDER BY id")]
    steps = [(row["round"], row["outcome"], row["approval"]) for row in rows]
    assert steps == [
        (1, "input_required", "asked"),
        (2, "ok", "accepted"),
        (1, "input_required", "asked"),
        (2, "rejected", "declined"),
    ]
    assert {(row["decision"], row["rule"]) for row in rows} == {("approve", "approve_destructive")}
    assert rows[0]["call_id"] == rows[1]["call_id"] != rows[2]["call_id"] == rows[3]["call_id"]
    assert rows[0]["approval_digest"] == rows[1]["approval_digest"] != rows[2]["approval_digest"]
    assert all(row["arguments"] is None for row in rows)  # include_arguments is off
    assert not any("secret" in str(value) for row in rows for value in row.values())
    assert [call["arguments"]["id"] for call in arrived(tmp_path)] == ["secret-1"]


async def test_a_modern_answer_replayed_is_refused_and_the_call_runs_once(tmp_path: Path) -> None:
    config = config_with(tmp_path)
    async with sdk_client(
        config, tmp_path / "g.log", mode=MODERN, elicitation_callback=answering(asked=[])
    ) as client:
        first = await client.session.call_tool("delete_item", {"id": "7"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        assert list(first.input_requests or {}) == [APPROVAL_KEY]
        yes = {APPROVAL_KEY: types.ElicitResult(action="accept", content={})}
        ran = await client.session.call_tool(
            "delete_item", {"id": "7"}, input_responses=yes, request_state=first.request_state
        )
        assert text_of(ran) == "deleted 7"
        with pytest.raises(MCPError) as replayed:
            await client.session.call_tool(
                "delete_item", {"id": "7"}, input_responses=yes, request_state=first.request_state
            )
        assert replayed.value.error.code == -32602 and "used already" in replayed.value.error.message
        with pytest.raises(MCPError) as other:  # the same approval for other arguments
            await client.session.call_tool(
                "delete_item", {"id": "8"}, input_responses=yes, request_state=first.request_state
            )
        assert "not this request's" in other.value.error.message
    assert [call["arguments"] for call in arrived(tmp_path)] == [{"id": "7"}]


META: Final = {
    PROTOCOL_VERSION_KEY: MODERN,
    CLIENT_CAPABILITIES_KEY: {"elicitation": {"form": {}}},
    CLIENT_INFO_KEY: {"name": "raw-modern", "version": "0"},
}


async def test_a_forged_or_malformed_modern_answer_is_refused_and_a_good_one_still_runs(
    tmp_path: Path,
) -> None:
    config = config_with(tmp_path)
    call = {"name": "delete_item", "arguments": {"id": "7"}, "_meta": META}
    async with raw_gateway(config, tmp_path / "g.log") as gateway:
        await gateway.request(1, "tools/call", call)
        first = (await gateway.answer_to(1))["result"]
        assert first["resultType"] == "input_required"
        state = first["requestState"]
        question = first["inputRequests"][APPROVAL_KEY]
        assert question["method"] == "elicitation/create" and question["params"]["mode"] == "form"
        # no state: asked again, whatever the client claims to have answered
        yes = {APPROVAL_KEY: {"action": "accept", "content": {}}}
        await gateway.request(2, "tools/call", {**call, "inputResponses": yes})
        assert (await gateway.answer_to(2))["result"]["resultType"] == "input_required"
        # a forged state, one character changed
        forged = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        await gateway.request(3, "tools/call", {**call, "inputResponses": yes, "requestState": forged})
        assert (await gateway.answer_to(3))["error"]["code"] == -32602
        # a malformed answer: refused, naming the field; the state is not spent by it
        for request_id, bad in enumerate(({"action": "yes"}, "accept", None), start=4):
            responses = {APPROVAL_KEY: bad} if bad is not None else {}
            await gateway.request(
                request_id, "tools/call", {**call, "inputResponses": responses, "requestState": state}
            )
            error = (await gateway.answer_to(request_id))["error"]
            assert error["code"] == -32602 and error["data"]["field"] == APPROVAL_KEY
        assert arrived(tmp_path) == []
        await gateway.request(9, "tools/call", {**call, "inputResponses": yes, "requestState": state})
        assert (await gateway.answer_to(9))["result"]["content"][0]["text"] == "deleted 7"
    assert [call["arguments"] for call in arrived(tmp_path)] == [{"id": "7"}]


async def test_a_legacy_answer_sent_twice_counts_once(tmp_path: Path) -> None:
    config = config_with(tmp_path)
    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw-legacy", "version": "0"},
    }
    async with raw_gateway(config, tmp_path / "g.log") as gateway:
        await gateway.request("init", "initialize", initialize)
        await gateway.answer_to("init")
        await gateway.notify("notifications/initialized")
        await gateway.call(1, "delete_item", id="7")
        question = (
            await gateway.receive_until(lambda message: message.get("method") == "elicitation/create")
        )[-1]
        assert "'delete_item' of backend 'alpha'" in question["params"]["message"]
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}}
        await gateway.send(answer)
        await gateway.send(answer)  # replayed: an answer to nothing asked any more
        forged = {**answer, "id": question["id"] + 1_000_000}
        await gateway.send(forged)
        assert (await gateway.answer_to(1))["result"]["content"][0]["text"] == "deleted 7"
        await gateway.call(2, "delete_item", id="8")  # the next call is asked again: nothing carried over
        again = (await gateway.receive_until(lambda message: message.get("method") == "elicitation/create"))[
            -1
        ]
        assert again["id"] != question["id"] and '{"id":"8"}' in again["params"]["message"]
        await gateway.send({"jsonrpc": "2.0", "id": again["id"], "result": {"action": "decline"}})
        assert (await gateway.answer_to(2))["result"]["isError"] is True
    assert [call["arguments"] for call in arrived(tmp_path)] == [{"id": "7"}]


async def legacy_raw(gateway: Any) -> None:
    """initialize as a client that declared elicitation."""
    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw-legacy", "version": "0"},
    }
    await gateway.request("init", "initialize", initialize)
    await gateway.answer_to("init")
    await gateway.notify("notifications/initialized")


def is_question(message: dict[str, Any]) -> bool:
    return message.get("method") == "elicitation/create"


async def test_a_legacy_call_cancelled_while_asked_withdraws_the_question_and_never_runs(
    tmp_path: Path,
) -> None:
    async with raw_gateway(config_with(tmp_path), tmp_path / "g.log") as gateway:
        await legacy_raw(gateway)
        await gateway.call(1, "delete_item", id="7")
        question = (await gateway.receive_until(is_question))[-1]
        await gateway.notify("notifications/cancelled", {"requestId": 1, "reason": "changed my mind"})
        withdrawn = (await gateway.receive_until(lambda m: m.get("method") == "notifications/cancelled"))[-1]
        assert withdrawn["params"]["requestId"] == question["id"]
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}}
        await gateway.send(answer)  # too late: nobody waits for it
        await gateway.call(2, "echo", text="after")
        seen = await gateway.receive_until(lambda m: m.get("id") == 2)
        assert [m for m in seen if m.get("id") == 1] == []  # a cancelled request gets no answer
        assert seen[-1]["result"]["content"][0]["text"] == "after"
    assert [call["name"] for call in arrived(tmp_path)] == ["echo"]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({"result": {"action": "yes"}}, "the client's answer was not accept, decline or cancel"),
        ({"result": ["accept"]}, "answered elicitation/create with a JSON array, not an object"),
        (
            {"error": {"code": -32601, "message": "no forms here"}},
            "the client could not answer: no forms here",
        ),
    ],
)
async def test_a_malformed_or_refused_legacy_answer_is_a_clear_refusal(
    tmp_path: Path, reply: dict[str, Any], why: str
) -> None:
    async with raw_gateway(config_with(tmp_path), tmp_path / "g.log") as gateway:
        await legacy_raw(gateway)
        await gateway.call(1, "delete_item", id="7")
        question = (await gateway.receive_until(is_question))[-1]
        await gateway.send({"jsonrpc": "2.0", "id": question["id"], **reply})
        result = (await gateway.answer_to(1))["result"]
        assert result["isError"] is True
        assert why in result["content"][0]["text"] and "not run" in result["content"][0]["text"]
        assert result["_meta"][META_KEY] == {"outcome": "failed", "rule": "approve_destructive"}
    assert arrived(tmp_path) == []


@ERAS
async def test_approval_over_streamable_http_and_websocket(tmp_path: Path, era: str) -> None:
    """Over HTTP a modern request is a session of its own: its answer is a new POST (no session to approve
    "for", so the form does not offer it), bound to the principal; a legacy HTTP session is asked on its
    call's stream. Over a WebSocket, as over stdio."""
    config = with_websocket(with_http(config_with(tmp_path)))
    asked: list[types.ElicitRequestParams] = []
    callback = answering("accept", "decline", "accept", "decline", asked=asked)
    async with running(config) as gateway:
        assert gateway.http_url is not None and gateway.websocket_url is not None
        with trio.fail_after(SESSION_DEADLINE_S):
            async with Client(gateway.http_url, mode=era, elicitation_callback=callback) as client:
                assert text_of(await client.call_tool("delete_item", {"id": "h1"})) == "deleted h1"
                assert (await client.call_tool("delete_item", {"id": "h2"})).is_error
            async with websocket_client(
                gateway.websocket_url, mode=era, elicitation_callback=callback
            ) as client:
                assert text_of(await client.call_tool("delete_item", {"id": "w1"})) == "deleted w1"
                assert (await client.call_tool("delete_item", {"id": "w2"})).is_error
    offered = [FOR_SESSION in (question.requested_schema or {}).get("properties", {}) for question in asked]  # type: ignore[union-attr]
    assert offered == ([False, False, True, True] if era == MODERN else [True] * 4)
    assert [call["arguments"]["id"] for call in arrived(tmp_path)] == ["h1", "w1"]


ROUNDS: Final = """[policy]
[[policy.rules]]
effect = "approve"
when = 'mcp.tool.name == "three_rounds"'
"""


@ERAS
async def test_an_approved_call_whose_backend_asks_counts_its_rounds_on_after_the_approval(
    tmp_path: Path, era: str
) -> None:
    """A modern backend (the SDK server of tests/backends/sdk_rounds.py) asks twice before it answers: the
    approval is asked once, at the call's first round, and the backend's rounds are not asked again."""
    backend = {"name": "r", "command": sys.executable, "args": [str(ROUNDS_BACKEND)], "era": "modern"}
    audit = tmp_path / "audit.sqlite3"
    config = write_config(tmp_path / "g.toml", [backend])
    config.write_text(config.read_text() + ROUNDS + f'[audit]\npath = "{audit}"\n')
    asked: list[types.ElicitRequestParams] = []
    callback = answering("accept", "accept", "accept", asked=asked, name="Ada")
    async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=callback) as client:
        assert not (await client.call_tool("three_rounds", {"text": "a"})).is_error
    assert "'three_rounds' of backend 'r'" in asked[0].message and len(asked) == 3  # approval + 2 rounds
    with sqlite3.connect(audit) as db:
        rows = db.execute(
            "SELECT round, outcome, approval FROM calls WHERE tool = 'three_rounds' ORDER BY id"
        )
        assert rows.fetchall() == [
            (1, "input_required", "asked"),
            (2, "input_required", "accepted"),
            (3, "input_required", None),
            (4, "ok", None),
        ]
