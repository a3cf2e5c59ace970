"""A modern backend's roots/list inside input_required, answered by its `roots` key (backends/round_roots.py):
what the caller gets, what the backend is sent again, and the bad rounds a backend can make."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from actors.backends.round_roots import answered_by_config
from actors.protocol.envelopes import Call, Reply, ReplySlot
from actors.protocol.eras import ModernEnvelope
from actors.protocol.modern_results import GATEWAY_ANSWERS

ROOTS = {"method": "roots/list"}
NAME = {"method": "elicitation/create", "params": {"message": "name?"}}
OURS = {"roots": [{"uri": "file:///srv/a", "name": "a"}]}


def link(roots: Any = ("file:///srv/a",), chosen: bool = True, modern: bool = True) -> Any:
    envelope = ModernEnvelope("2026-07-28", {}) if modern else None
    return SimpleNamespace(name="r", roots=roots, roots_chosen=chosen, envelope=envelope)


def asking(requests: dict[str, Any], **extra: Any) -> Reply:
    return Reply(result={"resultType": "input_required", "inputRequests": requests, **extra})


def call(params: dict[str, Any] | None = None) -> Call:
    return Call(7, "tools/call", {"name": "t", **(params or {})}, "s", ReplySlot())


def test_roots_alone_send_the_call_again_with_the_configured_answer_and_the_backends_state() -> None:
    again = answered_by_config(link(), call(), asking({"k": ROOTS}, requestState="st"))
    assert isinstance(again, Call) and again.call_id == 7
    assert again.params == {"name": "t", "inputResponses": {"k": OURS}, "requestState": "st"}


def test_with_other_requests_the_round_goes_on_with_the_gateways_answers_beside_it() -> None:
    reply = answered_by_config(link(), call(), asking({"k": ROOTS, "who": NAME}, requestState="st"))
    assert isinstance(reply, Reply) and reply.result["inputRequests"] == {"who": NAME}
    assert reply.result[GATEWAY_ANSWERS] == {"k": OURS} and reply.result["requestState"] == "st"


def test_none_fails_the_call_and_the_default_leaves_the_ask_to_the_client() -> None:
    refused = answered_by_config(link("none"), call(), asking({"k": ROOTS}))
    assert (
        isinstance(refused, Reply) and refused.error is not None and "offers it none" in refused.error.message
    )
    asked = asking({"k": ROOTS})
    assert answered_by_config(link("none", chosen=False), call(), asked) is asked
    assert answered_by_config(link("client"), call(), asked) is asked


def test_a_backend_asking_for_roots_again_fails_rather_than_loops() -> None:
    given = call({"inputResponses": {"k": OURS}})
    for requests in ({"k": ROOTS}, {"other-key": ROOTS}):
        refused = answered_by_config(link(), given, asking(requests))
        assert (
            isinstance(refused, Reply)
            and refused.error is not None
            and "asked again" in refused.error.message
        )


def test_a_backend_cannot_set_the_gateways_answers_itself() -> None:
    forged = asking({"who": NAME}, **{GATEWAY_ANSWERS: {"who": {"action": "accept"}}})
    for backend in (link(), link("client"), link(modern=False)):
        reply = answered_by_config(backend, call(), forged)
        assert isinstance(reply, Reply) and GATEWAY_ANSWERS not in reply.result
