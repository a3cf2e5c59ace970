"""The [policy] table: rules over who asks and what they name, compiled once when the config loads.

Semantics (agentgateway's, except that an evaluation error denies): any `deny` rule that holds denies;
every `require` rule must hold; `allow` rules are OR-ed; when no allow rule holds, `default` decides. A rule
that cannot be evaluated (a claim it reads is missing, a type mismatch, a result that is not a boolean)
denies, naming itself. Pure: no I/O, no clock.

An `approve` rule decides nothing of the above: a tools/call the rules allow and an approve rule holds for
runs only once the user at the client says yes (actors/session/approvals.py); it alone may read the call's
arguments (`mcp.tool.arguments`), since allow and deny decisions are kept per caller and tool. So does a
tool marked destructive with `approve_destructive`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from actors.policy.fast import Function, compile_fast

MAX_RULES: Final = 256  # rules in one [policy]: each one runs for every target a list names
MAX_EXPRESSION_CHARS: Final = 4096  # one `when`: an expression, not a program
MCP_KEYS: Final = frozenset({"method", "backend", "tool", "prompt", "resource"})
_MCP_USE: Final = re.compile(r"\bmcp\b\s*(?:\.\s*([A-Za-z_]\w*))?")
READS_ARGUMENTS: Final = re.compile(r"\barguments\b")  # only an approve rule may (see the module's doc)
APPROVAL_TTL_S: Final = 300.0  # how long a question waits for the user's answer, by default
MAX_APPROVAL_TTL_S: Final = 3600.0  # a modern client's answer is a sealed state remembered once spent
DESTRUCTIVE_RULE: Final = "approve_destructive"  # the rule an approval asked for a destructive tool names


class Effect(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE = "require"
    APPROVE = "approve"  # the call runs only after the user approves it through the client


class Unasked(enum.StrEnum):
    """What a call that needs approval gets when its client cannot be asked (no form elicitation)."""

    REFUSE = "refuse"  # a tool error naming the rule: it never runs silently
    ALLOW = "allow"  # it runs unasked (logged, audited)


class Default(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"


@attrs.frozen
class Rule:
    """One [[policy.rules]] table, compiled: `program` is the CEL program of `when`."""

    effect: Effect
    when: str
    name: str  # as written, or "rules[N]"
    program: Any = attrs.field(eq=False, repr=False)
    # The same rule read in Python (actors/policy/fast.py), None when it is outside that subset.
    fast: Function | None = attrs.field(default=None, eq=False, repr=False)
    # Whether it reads `mcp`: a rule that does not gives one answer per caller, whatever the target.
    reads_target: bool = attrs.field(default=True, eq=False, repr=False)


@attrs.frozen
class Decision:
    """What the policy says of one request: allowed or not, the rule that decided ("default" when none
    did), and why in a few words (for the log and the audit; never shown with claim values)."""

    allowed: bool
    rule: str
    reason: str

    @property
    def word(self) -> str:
        return "allow" if self.allowed else "deny"


ALLOWED_WITHOUT_POLICY: Final = Decision(True, "", "no policy")


@attrs.frozen
class Policy:
    """The compiled [policy]: its default and its rules by effect, in file order, and how approvals are
    asked (`approve_destructive`, `approval_ttl_s`, `when_unasked`)."""

    default: Default = Default.ALLOW
    rules: tuple[Rule, ...] = ()
    approve_destructive: bool = False  # a tool marked destructiveHint (not readOnlyHint) needs approval
    approval_ttl_s: float = APPROVAL_TTL_S
    when_unasked: Unasked = Unasked.REFUSE
    # The parts of `mcp` some rule reads: only these are handed to the engine for each target (each one
    # costs microseconds to convert); all of them when a rule reads `mcp` whole.
    mcp_keys: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    approves: tuple[Rule, ...] = attrs.field(init=False, eq=False, repr=False)  # the approve rules
    # whether one reads the call's arguments: else their answer is one per caller and tool, and is kept
    approves_by_arguments: bool = attrs.field(init=False, eq=False, repr=False)
    asks: bool = attrs.field(init=False, eq=False, repr=False)  # some call may need approval

    def __attrs_post_init__(self) -> None:
        keys: set[str] = set()
        for rule in self.rules:
            for match in _MCP_USE.finditer(rule.when):
                key = match.group(1)
                keys |= {key} if key in MCP_KEYS else MCP_KEYS  # `mcp` alone, or mcp[...]: all of it
        object.__setattr__(self, "mcp_keys", frozenset(keys))
        approves = tuple(rule for rule in self.rules if rule.effect is Effect.APPROVE)
        object.__setattr__(self, "approves", approves)
        by_arguments = any(may_read_arguments(rule.when) for rule in approves)
        object.__setattr__(self, "approves_by_arguments", by_arguments)
        object.__setattr__(self, "asks", bool(approves) or self.approve_destructive)

    def evaluate(self, run: Callable[[Rule], Any]) -> Decision:
        """Deny wins, then every require, then the first allow that holds, then the default (approve rules
        are not run: see `approval`). `run(rule)` gives a rule's value for the request
        (actors/policy/gate.py: in Python where it can, else CEL)."""
        allowed: Decision | None = None
        for rule in self.rules:
            if rule.effect is Effect.APPROVE or (rule.effect is Effect.ALLOW and allowed is not None):
                continue  # one allow is enough; denies and requires still run
            try:
                holds = run(rule)
            except Exception as exc:
                return Decision(False, rule.name, f"evaluation error ({type(exc).__name__}); an error denies")
            if not isinstance(holds, bool):
                return Decision(False, rule.name, "did not give a boolean; an error denies")
            if rule.effect is Effect.DENY and holds:
                return Decision(False, rule.name, "a deny rule holds")
            if rule.effect is Effect.REQUIRE and not holds:
                return Decision(False, rule.name, "a require rule does not hold")
            if rule.effect is Effect.ALLOW and holds:
                allowed = Decision(True, rule.name, "an allow rule holds")
        if allowed is not None:
            return allowed
        return Decision(
            self.default is Default.ALLOW, "default", f"no allow rule holds; default {self.default}"
        )

    def approval(self, run: Callable[[Rule], Any]) -> Decision | None:
        """The first approve rule that holds for a call the rules allow (allowed: approval needed), or None
        when none does; a rule that cannot be evaluated denies (not allowed), naming itself."""
        for rule in self.approves:
            try:
                holds = run(rule)
            except Exception as exc:
                return Decision(False, rule.name, f"evaluation error ({type(exc).__name__}); an error denies")
            if not isinstance(holds, bool):
                return Decision(False, rule.name, "did not give a boolean; an error denies")
            if holds:
                return Decision(True, rule.name, "an approve rule holds")
        return None


_MCP_PATH: Final = re.compile(r"\bmcp\b\s*(?:\.\s*([A-Za-z_]\w*)(?:\s*\.\s*([A-Za-z_]\w*))?)?")


def may_read_arguments(when: str) -> bool:
    """Whether an expression may read a call's arguments: it names them, or reads `mcp` or `mcp.tool` other
    than by `mcp.tool.name` and `mcp.tool.target` (its answer is then not one per caller and tool)."""
    if READS_ARGUMENTS.search(when):
        return True
    for match in _MCP_PATH.finditer(when):
        key, field = match.group(1), match.group(2)
        if key is None or (key == "tool" and field not in ("name", "target")):
            return True
    return False


def compile_rule(effect: Effect, when: str, name: str, sample: Mapping[str, Any]) -> Rule:
    """A rule compiled and tried once on `sample` (a context with every variable, empty): ValueError with
    the reason when it does not parse, names a variable that does not exist, or is not a boolean."""
    if len(when) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    if not when.strip():
        raise ValueError("is empty; write a CEL expression such as 'mcp.tool.name == \"add\"'")
    try:
        import cel  # the `policy` extra: only a config with [policy] needs it
    except ImportError:
        raise ValueError(
            "needs the CEL engine: pip install 'trio-mcp-gateway[policy]' (common-expression-language)"
        ) from None
    try:
        program = cel.compile(when)
    except ValueError as exc:
        raise ValueError(f"not a CEL expression: {_first_line(exc)}") from None
    try:
        result = program.execute(sample)
    except RuntimeError as exc:  # "Undefined variable or function": a misspelt name, found now
        raise ValueError(_first_line(exc)) from None
    except Exception:
        result = False
    if not isinstance(result, bool):
        raise ValueError(f"must give a boolean, gives {type(result).__name__}")
    return Rule(effect, when, name, program, compile_fast(when), _MCP_USE.search(when) is not None)


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


def rule_names(rules: Sequence[Rule]) -> tuple[str, ...]:
    return tuple(rule.name for rule in rules)
