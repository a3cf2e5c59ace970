"""The session's side of approvals, without a process: what an answer means, and what a session may hold
approved "for this session" (at most MAX_SESSION_APPROVALS, only where there is a session to hold it)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from actors.policy import STDIO_CALLER
from actors.policy.approval import DEFAULT_ROUTE, Need
from actors.protocol.messages import RpcError
from actors.session.approval_asks import APPROVAL_KEY, FOR_SESSION, Verdict, question, read_answer
from actors.session.approvals import MAX_SESSION_APPROVALS, _after

NEED = Need("approve_destructive", "the tool is marked destructive")


@pytest.mark.parametrize(
    ("answer", "offers", "word"),
    [
        ({"action": "accept"}, True, "accepted"),
        ({"action": "accept", "content": {FOR_SESSION: True}}, True, "accepted_for_session"),
        ({"action": "accept", "content": {FOR_SESSION: True}}, False, "accepted"),  # not offered: once
        ({"action": "accept", "content": {FOR_SESSION: "true"}}, True, "accepted"),
        ({"action": "decline"}, True, "declined"),
        ({"action": "cancel"}, True, "cancelled"),
    ],
)
def test_an_answer_reads_as_its_verdict(answer: dict[str, Any], offers: bool, word: str) -> None:
    verdict = read_answer(answer, "d1", offers)
    assert isinstance(verdict, Verdict) and (verdict.word, verdict.digest) == (word, "d1")
    assert verdict.approved is word.startswith("accepted")


@pytest.mark.parametrize("answer", [None, "accept", ["accept"], {}, {"action": "yes"}, {"action": None}])
def test_a_malformed_answer_is_invalid_params_naming_the_field(answer: object) -> None:
    error = read_answer(answer, "d1", True)
    assert isinstance(error, RpcError) and error.code == -32602
    assert error.data == {"field": APPROVAL_KEY}


def test_the_question_names_backend_tool_rule_and_offers_the_session_only_when_it_can() -> None:
    asked = question(NEED, "alpha", "rm\u202e", {"path": "/"}, "d1", offers_session=True, modern=True)
    assert asked.params["mode"] == "form"
    assert "'rm\\u202e' of backend 'alpha'" in asked.params["message"]
    assert '{"path":"/"}' in asked.params["message"] and "approve_destructive" in asked.params["message"]
    assert list(asked.params["requestedSchema"]["properties"]) == [FOR_SESSION]
    once = question(NEED, "alpha", "rm", {}, "d1", offers_session=False, modern=False)
    assert "mode" not in once.params and once.params["requestedSchema"]["properties"] == {}


def dispatcher(bound: str | None) -> Any:
    return SimpleNamespace(
        bound=bound, approved_tools=set(), settings=SimpleNamespace(tracing=None), caller=STDIO_CALLER
    )


def test_a_session_holds_at_most_its_cap_of_approved_tools() -> None:
    d = dispatcher("stdio")
    for n in range(MAX_SESSION_APPROVALS + 5):
        approval = _after(d, 1, Verdict("accepted_for_session", f"d{n}"), NEED, f"t{n}", ("alpha", f"t{n}"))
        assert approval.answer is None  # the call runs either way
    assert len(d.approved_tools) == MAX_SESSION_APPROVALS
    assert (DEFAULT_ROUTE, "alpha", "t0") in d.approved_tools


def test_a_request_without_a_session_remembers_nothing() -> None:
    d = dispatcher(None)  # a stateless 2026-07-28 HTTP request: a session of one request
    _after(d, 1, Verdict("accepted_for_session", "d1"), NEED, "t", ("alpha", "t"))
    assert d.approved_tools == set()


@pytest.mark.parametrize("word", ["declined", "cancelled", "expired", "failed"])
def test_an_unapproved_verdict_is_a_tool_error_naming_the_rule(word: str) -> None:
    d = dispatcher("stdio")
    approval = _after(d, 1, Verdict(word, "d1", "why"), NEED, "rm", ("alpha", "rm"))
    assert approval.answer is not None and approval.answer["isError"] is True
    assert "approve_destructive" in approval.answer["content"][0]["text"]
    assert approval.answer["_meta"]["mcp-gateway/approval"] == {"outcome": word, "rule": NEED.rule}
    assert d.approved_tools == set()
