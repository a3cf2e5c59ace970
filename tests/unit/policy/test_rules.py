"""[policy] rules: compiled at load, deny wins, every require must hold, allows are OR-ed, the default
decides the rest, and an evaluation error denies."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from actors.config import ConfigError, load_config
from actors.identity.principal import Principal, scopes_of
from actors.policy import Caller, PolicyGate, Target
from actors.policy.context import SAMPLE, caller_of
from actors.policy.rules import Decision, Default, Effect, Policy, compile_rule

ALICE = Caller(
    subject="alice", issuer="https://id.example", claims={"groups": ["eng"]}, scopes=("tools:call",)
)
BOB = Caller(subject="bob", claims={}, listener="websocket", address="10.0.0.2")


def policy(*rules: tuple[str, str], default: Default = Default.ALLOW) -> Policy:
    compiled = tuple(
        compile_rule(Effect(effect), when, f"rules[{index}]", SAMPLE)
        for index, (effect, when) in enumerate(rules)
    )
    return Policy(default, compiled)


def decide(rules: Policy, caller: Caller, target: Target) -> Decision:
    return PolicyGate(rules).decide(caller, target)


def tool(name: str, backend: str = "alpha") -> Target:
    return Target("tools/call", backend, tool=name)


def test_deny_wins_over_an_allow_that_holds() -> None:
    rules = policy(("allow", "true"), ("deny", 'mcp.tool.name == "drop"'))
    assert decide(rules, ALICE, tool("echo")).allowed
    decision = decide(rules, ALICE, tool("drop"))
    assert (decision.allowed, decision.rule) == (False, "rules[1]")


def test_every_require_must_hold_and_allows_are_ored() -> None:
    rules = policy(
        ("require", '"tools:call" in scopes'),
        ("allow", 'mcp.tool.name == "echo"'),
        ("allow", '"eng" in jwt.groups'),
        default=Default.DENY,
    )
    assert decide(rules, ALICE, tool("anything")).rule == "rules[2]"  # the second allow
    without_scope = Caller(subject="alice", claims={"groups": ["eng"]})
    decision = decide(rules, without_scope, tool("echo"))
    assert (decision.allowed, decision.rule) == (False, "rules[0]")


def test_the_default_decides_when_no_allow_holds() -> None:
    assert not decide(policy(("allow", "false"), default=Default.DENY), BOB, tool("x")).allowed
    decision = decide(policy(("allow", "false")), BOB, tool("x"))
    assert (decision.allowed, decision.rule) == (True, "default")


def test_an_evaluation_error_denies_naming_its_rule() -> None:
    """bob's token has no groups claim: the rule cannot be evaluated, and that denies, even an allow."""
    rules = policy(("allow", '"eng" in jwt.groups'))
    decision = decide(rules, BOB, tool("echo"))
    assert (decision.allowed, decision.rule) == (False, "rules[0]")
    assert "error" in decision.reason
    assert not decide(policy(("deny", "jwt.level > 3")), ALICE, tool("echo")).allowed


def test_the_caller_sees_its_claims_scopes_address_and_listener() -> None:
    rules = policy(
        ("require", 'source.listener == "websocket" && source.address.startsWith("10.")'),
        ("require", 'principal.subject == "bob" && principal.issuer == ""'),
        ("require", 'mcp.tool.target == "alpha" && mcp.method == "tools/call" && mcp.prompt.name == ""'),
    )
    assert decide(rules, BOB, tool("echo")).allowed


def test_rules_see_the_scopes_the_identity_layer_reads_from_a_token() -> None:
    """One reading of `scope`/`scp` (actors/identity/principal.py) for rules and tool_scopes alike."""

    def caller(claims: dict[str, object]) -> Caller:
        principal = Principal("https://id.example", "carol", scopes_of(claims), claims)
        return caller_of(principal, "1.2.3.4", "http")

    assert caller({"scope": "b a", "sub": "carol"}).scopes == ("a", "b")
    assert caller({"scp": ["a", "c"]}).scopes == ("a", "c")
    assert caller({"scp": ["a", 3, "c"]}).scopes == ()  # a list with a non-string grants nothing
    assert caller({"scope": {"not": "a list"}}).scopes == ()
    many = caller({"scope": " ".join(f"s{n:03}" for n in range(100)) + " write"})
    assert len(many.scopes) == 101 and many.scopes[-1] == "write"  # every one, as tool_scopes sees them
    deny_writers = policy(("deny", '"write" in scopes'), ("require", '"s099" in scopes'))
    assert decide(deny_writers, many, tool("echo")).rule == "rules[0]"
    assert caller_of(None, "1.2.3.4", "http").key != caller_of(None, "1.2.3.5", "http").key


def test_a_configured_stdio_principal_is_a_caller_with_its_configured_scopes() -> None:
    principal = Principal("local", "editor", frozenset({"write", "read"}))
    caller = caller_of(principal, "stdio", "stdio")
    assert (caller.subject, caller.issuer, caller.scopes) == ("editor", "local", ("read", "write"))
    assert caller.variables["scopes"] == ["read", "write"] and caller.variables["jwt"] == {}


@pytest.mark.parametrize(
    ("when", "reason"),
    [
        ("jwt.sub ==", "not a CEL expression"),
        ('mcpp.tool.name == "x"', "Undefined variable"),
        ('mcp.tool.name + "x"', "must give a boolean"),
        ("   ", "is empty"),
        ("true || " * 1000 + "true", "longer than"),
    ],
)
def test_a_rule_that_does_not_compile_is_named_file_key_reason(
    tmp_path: Path, when: str, reason: str
) -> None:
    config = tmp_path / "g.toml"
    config.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n[policy]\n[[policy.rules]]\nwhen = "true"\n'
        f"[[policy.rules]]\neffect = 'deny'\nwhen = '{when}'\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    (problem,) = refused.value.problems
    assert (problem.file, problem.key) == (str(config), "policy.rules[1].when")
    assert reason in problem.reason


def test_a_bad_effect_or_default_is_named(tmp_path: Path) -> None:
    config = tmp_path / "g.toml"
    config.write_text(
        '[[backends]]\nname = "a"\ncommand = "python"\n[policy]\ndefault = "maybe"\n'
        '[[policy.rules]]\neffect = "forbid"\nwhen = "true"\n[[policy.rules]]\nname = "x"\n'
    )
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    keys = sorted(problem.key for problem in refused.value.problems)
    assert keys == ["policy.default", "policy.rules[0].effect", "policy.rules[1].when"]


def test_filtering_500_tools_is_computed_once_per_caller_and_list_version() -> None:
    """The first tools/list of a caller evaluates the rules per tool; later ones (any session of the same
    caller, same catalog version and rules) take the cached list. Figures go to docs/performance.md."""
    rules = policy(
        *[("deny", f'mcp.tool.name == "blocked{n}"') for n in range(5)],
        ("require", 'principal.subject != ""'),
        *[("allow", f'"g{n}" in jwt.groups') for n in range(3)],
        ("allow", 'mcp.tool.name.startsWith("t")'),
        default=Default.DENY,
    )
    gate = PolicyGate(rules)
    items = tuple({"name": f"t{n}"} for n in range(500))
    caller = Caller(subject="alice", claims={"groups": ["other"]})
    started = time.perf_counter()
    first = gate.visible(caller, "tools", 1, items, lambda item: tool(item["name"]))
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = gate.visible(
        Caller(subject="alice", claims={"groups": ["other"]}), "tools", 1, items, lambda i: None
    )
    cached_s = time.perf_counter() - started
    print(f"500 tools, 10 rules: first {first_s * 1000:.1f} ms, cached {cached_s * 1e6:.0f} us")
    assert len(first) == 500 and again is first  # the same caller's next listing: no rule runs
    assert gate.visible(caller, "tools", 2, items, lambda item: None) == ()  # a new version: evaluated anew
    gate.swap(policy(("allow", "true")))
    assert gate.visible(caller, "tools", 2, items, lambda item: tool(item["name"])) == items  # new rules


def test_a_decision_is_kept_per_caller_and_target_until_the_rules_change() -> None:
    gate = PolicyGate(policy(("allow", 'mcp.tool.name == "echo"'), default=Default.DENY))
    first = gate.decide(ALICE, tool("echo"))
    assert gate.decide(ALICE, tool("echo")) is first  # kept: no rule ran again
    assert not gate.decide(ALICE, tool("add")).allowed
    assert gate.decisions == {("tools/call", "allow"): 2, ("tools/call", "deny"): 1}  # each one counted
    gate.swap(policy(("deny", "true")))
    assert not gate.decide(ALICE, tool("echo")).allowed  # the new rules alone


def test_decisions_on_long_uris_are_made_each_time_not_kept() -> None:
    """A client may name any URI of up to 8192 characters behind a backend's prefix: kept, 8192 of them were
    a quarter of a GiB. A long one is judged each time (rightly), and nothing of it stays."""
    gate = PolicyGate(policy(("deny", 'mcp.resource.uri.startsWith("notes+secret")')))

    def read(uri: str) -> Target:
        return Target("resources/read", "notes", uri=uri)

    tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(200):
            assert gate.decide(ALICE, read(f"notes+{n}" + "\U0001f600" * 8000)).allowed
        kept_bytes = tracemalloc.get_traced_memory()[0] - before
    finally:
        if not tracing:
            tracemalloc.stop()
    assert kept_bytes < 1 << 20, kept_bytes  # 200 of them kept: over 6 MiB
    assert not gate.decide(ALICE, read("notes+secret" + "x" * 8000)).allowed
    short = gate.decide(ALICE, read("notes+a"))
    assert gate.decide(ALICE, read("notes+a")) is short  # a short one is kept as before


@pytest.mark.parametrize("rules", ['"x" ', "[" + ", ".join(["{ when = 'true' }"] * 257) + "]"])
def test_rules_that_are_not_an_array_or_too_many_are_one_problem(tmp_path: Path, rules: str) -> None:
    config = tmp_path / "g.toml"
    config.write_text(f'[[backends]]\nname = "a"\ncommand = "python"\n[policy]\nrules = {rules}\n')
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    assert [(p.key, p.reason) for p in refused.value.problems] == [
        ("policy.rules", "expected at most 256 [[policy.rules]] tables")
    ]
