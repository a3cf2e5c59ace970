"""The [policy] table: rules over who asks and what they name, compiled once when the config loads.

Semantics (agentgateway's, except that an evaluation error denies): any `deny` rule that holds denies;
every `require` rule must hold; `allow` rules are OR-ed; when no allow rule holds, `default` decides. A rule
that cannot be evaluated (a claim it reads is missing, a type mismatch, a result that is not a boolean)
denies, naming itself. Pure: no I/O, no clock.
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


class Effect(enum.StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE = "require"


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
    """The compiled [policy]: its default and its rules by effect, in file order."""

    default: Default = Default.ALLOW
    rules: tuple[Rule, ...] = ()
    # The parts of `mcp` some rule reads: only these are handed to the engine for each target (each one
    # costs microseconds to convert); all of them when a rule reads `mcp` whole.
    mcp_keys: frozenset[str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        keys: set[str] = set()
        for rule in self.rules:
            for match in _MCP_USE.finditer(rule.when):
                key = match.group(1)
                keys |= {key} if key in MCP_KEYS else MCP_KEYS  # `mcp` alone, or mcp[...]: all of it
        object.__setattr__(self, "mcp_keys", frozenset(keys))

    def evaluate(self, run: Callable[[Rule], Any]) -> Decision:
        """Deny wins, then every require, then the first allow that holds, then the default. `run(rule)`
        gives a rule's value for the request (actors/policy/gate.py: in Python where it can, else CEL)."""
        allowed: Decision | None = None
        for rule in self.rules:
            if rule.effect is Effect.ALLOW and allowed is not None:
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
