"""The Python reading of simple rules (actors/policy/fast.py) against the CEL engine: where it answers, it
answers what the engine does; where it is not certain it says so; and filtering a list with the
caller-only rules run once shows exactly what a decision per item would."""

from __future__ import annotations

from typing import Any

import cel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.policy import Caller, PolicyGate, Target
from actors.policy.context import SAMPLE
from actors.policy.fast import Fallback, compile_fast
from actors.policy.rules import Default, Effect, Policy, compile_rule
from actors.policy.run import filter_items

WORDS = ["", "a", "add", "admins", "eng", "t1", "git_push", "é", "ab"]
words = st.sampled_from(WORDS)
scalars = st.one_of(words, st.booleans(), st.integers(-3, 3), st.sampled_from([2**63, -(2**63) - 1, 1.5]))
claim_values = st.one_of(scalars, st.lists(scalars, max_size=3), st.lists(words, max_size=3))
CLAIM_NAMES = ["groups", "team", "level", "admin", "sub"]
claims = st.dictionaries(st.sampled_from(CLAIM_NAMES), claim_values, max_size=4)

# Expressions of the subset, over names that exist and names that may not (claims are random).
PATHS = [
    "mcp.tool.name",
    "mcp.backend",
    "mcp.method",
    "principal.subject",
    "source.listener",
    "jwt.groups",
    "jwt.team",
    "jwt.level",
    "jwt.admin",
    "jwt.sub",
    "scopes",
]
atoms = st.one_of(
    st.sampled_from(PATHS),
    words.map(lambda word: f'"{word}"'),
    st.sampled_from(["true", "false", "1", "0", "3", "[]", '["a", "eng"]', '["add", 1]']),
)


def _binary(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["==", "!=", "in", "&&", "||"]), children).map(" ".join),
        children.map(lambda inner: f"!({inner})"),
        children.map(lambda inner: f"({inner})"),
        st.tuples(st.sampled_from(PATHS), st.sampled_from(["startsWith", "endsWith", "contains"]), words).map(
            lambda parts: f'{parts[0]}.{parts[1]}("{parts[2]}")'
        ),
        st.sampled_from(["has(jwt.groups)", "has(jwt.team)", "has(mcp.tool)", "has(jwt.team.x)"]),
    )


expressions = st.recursive(atoms, _binary, max_leaves=6)


def variables(claim_set: dict[str, Any], tool: str, backend: str) -> dict[str, Any]:
    caller = Caller(subject="alice", claims=claim_set, scopes=("tools:call",), listener="websocket")
    return {**caller.variables, "mcp": Target("tools/call", backend, tool=tool).variables()}


def engine(expression: str, values: dict[str, Any]) -> Any:
    try:
        return cel.compile(expression).execute(values)
    except Exception:
        return "engine error"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, claims, words, words)
def test_where_python_answers_it_answers_what_the_engine_does(
    expression: str, claim_set: dict[str, Any], tool: str, backend: str
) -> None:
    function = compile_fast(expression)
    if function is None:
        return  # outside the subset: always the engine (test_what_stays_on_the_engine)
    values = variables(claim_set, tool, backend)
    try:
        answer = function(values)
    except Fallback:
        return  # not certain: the engine runs
    assert answer == engine(expression, values), expression
    assert type(answer) is bool


@pytest.mark.parametrize(
    "expression",
    [
        'mcp.tool.name == "add"',
        '"admins" in jwt.groups && !(mcp.backend in ["a", "b"])',
        'mcp.tool.name.startsWith("git_") || has(jwt.team)',
        "jwt.level == 3 && jwt.admin == true",
    ],
)
def test_the_rules_operators_write_have_a_python_reading(expression: str) -> None:
    assert compile_fast(expression) is not None


@pytest.mark.parametrize(
    "expression",
    [
        "jwt.level > 3",  # an order: not in the subset
        "size(jwt.groups) == 2",
        'jwt.groups.exists(g, g == "eng")',
        'mcp.tool.name == "a\\"b"',  # an escape
        '"""x""" == mcp.tool.name',
        "jwt.level == 1.0",
        "jwt.level == 3u",
        'jwt["team"] == "x"',
        "jwt.admin ? true : false",
        "-1 == jwt.level",
        "jwt.level == 99999999999999999999",
        "(" * 3000 + "true" + ")" * 3000,
    ],
)
def test_what_stays_on_the_engine(expression: str) -> None:
    assert compile_fast(expression) is None


def test_a_value_python_is_not_sure_of_goes_to_the_engine() -> None:
    function = compile_fast('jwt.team == "eng"')
    assert function is not None
    for claim_set in ({}, {"team": 1}, {"team": ["eng"]}, {"team": None}):
        with pytest.raises(Fallback):
            function(variables(claim_set, "t", "b"))


def test_a_claim_holding_a_lone_surrogate_is_read_alike_by_python_and_the_engine() -> None:
    """JSON can escape a lone surrogate; the engine refused every variable holding one, so each rule it ran
    failed (and denied) while the Python reading answered. Both now read it as U+FFFD."""
    caller = Caller(subject="alice", claims={"team": "eng", "name": "ali\ud800"}, listener="http")
    values = {**caller.variables, "mcp": Target("tools/call", "a", tool="add").variables()}
    for expression in ('jwt.name.startsWith("ali")', 'jwt.team == "eng"'):
        function = compile_fast(expression)
        assert function is not None
        assert function(values) is True and engine(expression, values) is True
    rules = Policy(
        Default.DENY,
        (
            compile_rule(Effect.REQUIRE, "size(jwt.team) == 3", "engine-only", SAMPLE),
            compile_rule(Effect.ALLOW, 'jwt.team == "eng"', "fast", SAMPLE),
        ),
    )
    assert PolicyGate(rules).decide(caller, Target("tools/call", "a", tool="add")).rule == "fast"


rule_sets = st.lists(st.tuples(st.sampled_from(list(Effect)), expressions), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets, st.sampled_from(list(Default)), claims)
def test_filtering_a_list_shows_exactly_what_a_decision_per_item_allows(
    rules: list[tuple[Effect, str]], default: Default, claim_set: dict[str, Any]
) -> None:
    compiled = []
    for index, (effect, when) in enumerate(rules):
        try:
            compiled.append(compile_rule(effect, when, f"rules[{index}]", SAMPLE))
        except ValueError:
            continue  # a rule `check` would refuse
    policy = Policy(default, tuple(compiled))
    caller = Caller(subject="alice", claims=claim_set, scopes=("tools:call",), listener="websocket")
    items = tuple({"name": word, "backend": backend} for word in WORDS for backend in ("a", "b"))

    def target_of(item: Any) -> Target:
        return Target("tools/call", item["backend"], tool=item["name"])

    gate = PolicyGate(policy)
    expected = tuple(item for item in items if gate.decide(caller, target_of(item)).allowed)
    assert filter_items(policy, caller, items, target_of) == expected
