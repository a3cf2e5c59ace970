"""Approval in the policy layer: approve rules need the user's yes and decide nothing else (a tool they mark
is listed and allowed as before); they alone read the call's arguments; an error in one denies. The digest an
approval is bound to is one per call (RFC 8785 canonical arguments) and differs for any other call; what the
user is shown of the arguments is bounded and hides nothing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import AuditSettings, ConfigError, load_config
from actors.middleware import CallOutcome, ClientInfo, ToolCall
from actors.middleware.audit import AuditStore, make_record
from actors.policy import Caller, PolicyGate, Target
from actors.policy.approval import (
    MAX_CANONICAL_BYTES,
    MAX_SUMMARY_CHARS,
    DestructiveTools,
    approval_digest,
    canonical_arguments,
    is_destructive,
    summary,
)
from actors.policy.context import SAMPLE
from actors.policy.rules import Default, Effect, Policy, Unasked, compile_rule
from actors.policy.run import filter_items

ALICE = Caller(subject="alice", issuer="https://id.example", claims={"groups": ["eng"]})


def policy(*rules: tuple[str, str], **settings: Any) -> Policy:
    compiled = tuple(
        compile_rule(Effect(effect), when, f"rules[{n}]", SAMPLE) for n, (effect, when) in enumerate(rules)
    )
    return Policy(Default.ALLOW, compiled, **settings)


def call(tool: str, arguments: Any = None) -> Target:
    return Target("tools/call", "alpha", tool=tool, arguments=arguments)


ON_ETC = 'has(mcp.tool.arguments.path) && mcp.tool.arguments.path.startsWith("/etc")'


def test_an_approve_rule_asks_and_decides_nothing_else() -> None:
    rules = policy(("approve", ON_ETC), ("deny", 'mcp.tool.name == "drop"'))
    gate = PolicyGate(rules)
    assert gate.decide(ALICE, call("write", {"path": "/etc/passwd"})).allowed  # allowed: then asked
    approval = gate.approval(ALICE, call("write", {"path": "/etc/passwd"}))
    assert approval is not None and (approval.allowed, approval.rule) == (True, "rules[0]")
    assert gate.approval(ALICE, call("write", {"path": "/tmp/x"})) is None
    assert gate.approval(ALICE, call("write")) is None  # no arguments: has() is false
    assert not gate.decide(ALICE, call("drop")).allowed  # deny still wins, before anything is asked
    assert gate.decisions[("tools/call", "approve")] == 1


def test_an_approve_rule_that_fails_denies_naming_itself() -> None:
    gate = PolicyGate(policy(("approve", "mcp.tool.arguments.path.startsWith('/etc')")))
    failed = gate.approval(ALICE, call("write", {"size": 1}))  # no path: the engine errors
    assert failed is not None and (failed.allowed, failed.rule) == (False, "rules[0]")
    assert "an error denies" in failed.reason


def test_a_tool_an_approve_rule_marks_is_still_listed() -> None:
    rules = policy(("approve", 'mcp.tool.name == "write"'), ("deny", 'mcp.tool.name == "drop"'))
    items = ({"name": "write"}, {"name": "drop"}, {"name": "read"})
    shown = filter_items(rules, ALICE, items, lambda item: call(item["name"]))
    assert [item["name"] for item in shown] == ["write", "read"]


def test_approval_settings_are_part_of_the_policy_a_reload_compares() -> None:
    assert policy() == policy()
    assert not policy().asks
    assert policy(approve_destructive=True).asks and policy(("approve", "true")).asks
    assert policy(approve_destructive=True) != policy()
    assert policy(when_unasked=Unasked.ALLOW) != policy()
    assert policy(approval_ttl_s=5.0) != policy()


def write(tmp_path: Path, table: str) -> Path:
    config = tmp_path / "g.toml"
    config.write_text(f'[[backends]]\nname = "a"\ncommand = "python"\n[policy]\n{table}')
    return config


def test_only_an_approve_rule_may_read_the_arguments(tmp_path: Path) -> None:
    config = write(tmp_path, f"[[policy.rules]]\neffect = 'deny'\nwhen = '{ON_ETC}'\n")
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    (problem,) = refused.value.problems
    assert (problem.file, problem.key) == (str(config), "policy.rules[0].when")
    assert 'only an effect = "approve" rule may' in problem.reason
    allowed = write(tmp_path, f"[[policy.rules]]\neffect = 'approve'\nwhen = '{ON_ETC}'\n")
    loaded = load_config(allowed).policy
    assert loaded is not None and loaded.approves[0].effect is Effect.APPROVE


def test_bad_approval_keys_are_named_and_check_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, 'approve_destructive = "yes"\napproval_ttl_s = 0\nwhen_unasked = "maybe"\n')
    assert main(["check", "--config", str(config)]) == EXIT_CONFIG_ERROR == 2
    lines = capsys.readouterr().err.splitlines()
    assert f"{config}: policy.approve_destructive: expected true or false, got a string" in lines
    assert f"{config}: policy.approval_ttl_s: must be greater than 0" in lines
    assert any(line.startswith(f"{config}: policy.when_unasked: 'maybe' is not one of") for line in lines)
    too_long = write(tmp_path, "approval_ttl_s = 86400\n")
    with pytest.raises(ConfigError) as refused:
        load_config(too_long)
    assert [(p.key, p.reason) for p in refused.value.problems] == [
        ("policy.approval_ttl_s", "must be at most 3600")
    ]


def test_the_digest_is_one_per_call_whatever_its_spelling() -> None:
    principal = ["https://id.example", "alice"]
    digest = approval_digest(principal, "alpha", "write", {"b": 1.0, "a": ["é", True]})
    assert digest == approval_digest(principal, "alpha", "write", {"a": ["é", True], "b": 1})
    assert canonical_arguments({"b": 1.0, "a": "é"}) == '{"a":"é","b":1}'.encode()
    others = {
        approval_digest(["https://id.example", "bob"], "alpha", "write", {"a": ["é", True], "b": 1}),
        approval_digest(None, "alpha", "write", {"a": ["é", True], "b": 1}),
        approval_digest(principal, "beta", "write", {"a": ["é", True], "b": 1}),
        approval_digest(principal, "alpha", "erase", {"a": ["é", True], "b": 1}),
        approval_digest(principal, "alpha", "write", {"a": ["é", True], "b": 2}),
        approval_digest(principal, "alpha", "write", {"a": ["é", True], "b": 1}, route="admin"),
    }
    assert digest not in others and len(others) == 6


def test_arguments_the_scheme_cannot_write_or_too_long_for_it_still_get_one_form() -> None:
    for value, other in ((2**70, 2**70 + 1), (2**60, 2**60 + 1), ("x" * MAX_CANONICAL_BYTES, "y")):
        assert canonical_arguments({"n": value}).startswith(b"non-jcs:")
        assert approval_digest(None, "a", "t", {"n": value}) == approval_digest(None, "a", "t", {"n": value})
        assert approval_digest(None, "a", "t", {"n": value}) != approval_digest(None, "a", "t", {"n": other})


def test_canonicalizing_hostile_arguments_is_bounded() -> None:
    """100,000 small objects (2 MB) took the scheme a second of the event loop: past MAX_CANONICAL_BYTES
    the C writer's sorted form is used."""
    many = {"items": [{"k": n, "v": "abc"} for n in range(100_000)]}
    started = time.perf_counter()
    canonical_arguments(many)
    assert time.perf_counter() - started < 0.2


def test_the_summary_is_bounded_and_hides_nothing() -> None:
    hidden = "ok\u202ereversed\u200bzero\U000e0041tag\x1b[2J\nline"
    shown = summary({"text": hidden})
    for character in ("\u202e", "\u200b", "\U000e0041", "\x1b", "\n"):
        assert character not in shown
    assert "\\u202e" in shown and "\\u200b" in shown and "\\U000e0041" in shown
    long = summary({"text": "x" * 10_000})
    assert len(long) < MAX_SUMMARY_CHARS + 60 and "characters in all" in long


@pytest.mark.parametrize(
    ("annotations", "destructive"),
    [
        ({"destructiveHint": True}, True),
        ({"destructiveHint": True, "readOnlyHint": False}, True),
        ({"destructiveHint": True, "readOnlyHint": True}, False),
        ({"destructiveHint": "true"}, False),
        ({"destructiveHint": False}, False),
        ({}, False),
        (["destructiveHint"], False),
        (None, False),
    ],
)
def test_a_tool_is_destructive_only_when_it_says_so_plainly(annotations: Any, destructive: bool) -> None:
    assert is_destructive({"name": "t", "annotations": annotations}) is destructive


def test_the_destructive_names_are_worked_out_once_per_list() -> None:
    tools = ({"name": "rm", "annotations": {"destructiveHint": True}}, {"name": "ls"})
    book = DestructiveTools()
    first = book.names(tools)
    assert first == {"rm"} and book.names(tools) is first  # the same list: a look-up
    assert book.names((*tools, {"name": "dd", "annotations": {"destructiveHint": True}})) == {"rm", "dd"}


@pytest.mark.parametrize(
    ("when", "reads"),
    [
        ('mcp.tool.name == "rm"', False),
        ('mcp.tool.target == "alpha" && mcp.backend == "alpha" && "eng" in jwt.groups', False),
        ("has(mcp.tool.arguments.path)", True),
        ('mcp.tool["arguments"] == {}', True),
        ("size(mcp.tool) > 2", True),
        ('mcp["tool"]["name"] == "rm"', True),  # mcp whole: it may reach anything
    ],
)
def test_an_approve_rule_that_reads_no_arguments_is_kept_per_caller_and_tool(when: str, reads: bool) -> None:
    rules = policy(("approve", when))
    assert rules.approves_by_arguments is reads
    gate = PolicyGate(rules)
    gate.approval(ALICE, call("rm", {"path": "/"}))
    assert (len(gate._approvals) == 0) is reads  # kept only when the arguments cannot change the answer
    gate.swap(policy())
    assert gate._approvals == {}


def test_a_kept_approval_answers_as_the_rule_would() -> None:
    gate = PolicyGate(policy(("approve", 'mcp.tool.name == "rm" && "eng" in jwt.groups')))
    for _ in range(2):
        kept = gate.approval(ALICE, call("rm", {"a": 1}))
        assert kept is not None and kept.allowed
        assert gate.approval(ALICE, call("ls")) is None
        assert gate.approval(Caller(subject="bob", claims={"groups": []}), call("rm")) is None


def test_the_examples_commented_out_policy_is_valid_with_the_approval_defaults(tmp_path: Path) -> None:
    lines = (Path(__file__).resolve().parents[3] / "config" / "example.toml").read_text().splitlines()
    start = lines.index("# [policy]")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    config = tmp_path / "policy.toml"
    config.write_text('[[backends]]\nname = "a"\ncommand = "python"\n' + "\n".join(block) + "\n")
    loaded = load_config(config).policy
    assert loaded is not None and not loaded.approve_destructive
    assert (loaded.approval_ttl_s, loaded.when_unasked) == (300.0, Unasked.REFUSE)
    assert [rule.effect for rule in loaded.rules] == [Effect.DENY, Effect.APPROVE]
    assert loaded.approves_by_arguments


def test_an_audit_file_from_before_approvals_gets_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    with sqlite3.connect(path) as db:  # the columns up to rule, as files were written before #36
        db.execute(
            "CREATE TABLE calls (id INTEGER PRIMARY KEY, time TEXT NOT NULL, session TEXT NOT NULL, subject"
            " TEXT, client TEXT, backend TEXT, tool TEXT NOT NULL, backend_tool TEXT, duration_ms REAL NOT"
            " NULL, outcome TEXT NOT NULL, error_code INTEGER, argument_bytes INTEGER NOT NULL, result_bytes"
            " INTEGER NOT NULL, arguments TEXT, cut TEXT, call_id TEXT, round INTEGER NOT NULL DEFAULT 1,"
            " decision TEXT, rule TEXT)"
        )
    db.close()
    store = AuditStore(AuditSettings(path=path))
    store.open()
    call = ToolCall(ClientInfo("stdio"), "rm", "alpha", "rm", {"path": "/"}, 0.0, decision="approve")
    call.rule, call.approval, call.approval_digest = "approve_destructive", "declined", "ab" * 32
    store.write([make_record(call, CallOutcome(rejected=True), False)])
    store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT decision, rule, approval, approval_digest, arguments FROM calls").fetchall()
    db.close()
    assert rows == [("approve", "approve_destructive", "declined", "ab" * 32, None)]
