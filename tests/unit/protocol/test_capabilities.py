"""What a client must have declared before a server's ask may reach it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.protocol.capabilities import INPUT_REQUEST_CAPABILITIES, missing_capability, required_capabilities

FORM = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
URL = {"mode": "url", "message": "Log in", "url": "https://example.com"}


@pytest.mark.parametrize(
    ("method", "params", "required"),
    [
        ("elicitation/create", FORM, {"elicitation": {"form": {}}}),
        ("elicitation/create", {**FORM, "mode": "form"}, {"elicitation": {"form": {}}}),
        ("elicitation/create", URL, {"elicitation": {"url": {}}}),
        ("elicitation/create", None, {"elicitation": {"form": {}}}),
        ("sampling/createMessage", {"messages": []}, {"sampling": {}}),
        ("sampling/createMessage", {"messages": [], "tools": []}, {"sampling": {"tools": {}}}),
        (
            "sampling/createMessage",
            {"messages": [], "toolChoice": {"mode": "auto"}},
            {"sampling": {"tools": {}}},
        ),
        ("roots/list", None, {"roots": {}}),
        ("tools/call", {"name": "t"}, None),
    ],
)
def test_each_ask_needs_its_capability_and_mode(method: str, params: object, required: object) -> None:
    assert required_capabilities(method, params) == required
    if required is not None:
        assert set(required) == {INPUT_REQUEST_CAPABILITIES[method]}


@pytest.mark.parametrize(
    ("method", "params", "declared", "missing"),
    [
        ("sampling/createMessage", {}, {"sampling": {}}, None),
        ("sampling/createMessage", {}, {}, {"sampling": {}}),
        ("sampling/createMessage", {"tools": []}, {"sampling": {}}, {"sampling": {"tools": {}}}),
        ("sampling/createMessage", {"tools": []}, {"sampling": {"tools": {}}}, None),
        ("roots/list", None, {"roots": {"listChanged": True}}, None),
        ("roots/list", None, {"sampling": {}}, {"roots": {}}),
        # a bare elicitation declares form mode only; naming a mode drops that reading
        ("elicitation/create", FORM, {"elicitation": {}}, None),
        ("elicitation/create", URL, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("elicitation/create", FORM, {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("elicitation/create", URL, {"elicitation": {"form": {}, "url": {}}}, None),
        # hostile declarations declare nothing
        ("sampling/createMessage", {}, {"sampling": True}, {"sampling": {}}),
        ("elicitation/create", FORM, {"elicitation": None}, {"elicitation": {"form": {}}}),
        ("roots/list", None, ["roots"], {"roots": {}}),
        ("roots/list", None, None, {"roots": {}}),
        ("ping", None, {}, None),
    ],
)
def test_missing_capability_names_exactly_what_is_lacking(
    method: str, params: object, declared: object, missing: dict[str, Any] | None
) -> None:
    assert missing_capability(method, params, declared) == missing


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from([*INPUT_REQUEST_CAPABILITIES, "tools/call"]) | st.text(max_size=20)
declarations = (
    st.dictionaries(st.sampled_from(["sampling", "elicitation", "roots", "x"]), json_values) | json_values
)


@settings(deadline=None)
@given(methods, json_values, declarations)
def test_missing_capability_never_raises_and_answers_a_subset_of_the_requirement(
    method: str, params: object, declared: object
) -> None:
    missing = missing_capability(method, params, declared)
    required = required_capabilities(method, params)
    if missing is not None:
        assert required is not None and set(missing) <= set(required)
