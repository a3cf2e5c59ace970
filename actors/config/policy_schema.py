"""[policy] and [[policy.rules]] as written. Each rule's `when` is compiled as it is read (its validator),
so a rule that does not compile is reported as `FILE: policy.rules[N].when: reason` by `check` and at
start; `PolicyTable.compiled()` is what sessions use (actors.policy.rules). The approval keys say when a
tools/call waits for the user's yes (actors/session/approvals.py)."""

from __future__ import annotations

from typing import Any

import attrs

from actors.config.checks import not_blank, positive, rule
from actors.policy.context import SAMPLE
from actors.policy.rules import (
    APPROVAL_TTL_S,
    MAX_APPROVAL_TTL_S,
    READS_ARGUMENTS,
    Default,
    Effect,
    Policy,
    Unasked,
    compile_rule,
)


def _compiles(instance: Any, _attribute: Any, when: str) -> None:
    compile_rule(Effect.ALLOW, when, "", SAMPLE)  # ValueError with the reason when it does not
    if instance.effect is not Effect.APPROVE and READS_ARGUMENTS.search(when):
        raise ValueError(
            'reads the call\'s arguments, which only an effect = "approve" rule may (allow and deny '
            "decisions are kept per caller and tool, whatever the arguments)"
        )


@attrs.frozen(kw_only=True)
class RuleTable:
    """[[policy.rules]]."""

    effect: Effect = Effect.ALLOW
    when: str = attrs.field(validator=_compiles)  # CEL over jwt, scopes, principal, source and mcp
    name: str | None = attrs.field(default=None, validator=attrs.validators.optional(not_blank))


@attrs.frozen(kw_only=True)
class PolicyTable:
    """[policy]."""

    default: Default = Default.ALLOW  # what a request gets when no allow rule holds
    rules: tuple[RuleTable, ...] = ()  # at most MAX_RULES (load.py checks before reading them)
    approve_destructive: bool = False  # a tool marked destructiveHint (not readOnlyHint) needs approval
    approval_ttl_s: float = attrs.field(  # how long the user has to answer
        default=APPROVAL_TTL_S,
        validator=[
            positive,
            rule(lambda value: value <= MAX_APPROVAL_TTL_S, f"must be at most {MAX_APPROVAL_TTL_S:g}"),
        ],
    )
    when_unasked: Unasked = Unasked.REFUSE  # a client that cannot be asked: refused, or run unasked

    def compiled(self, label: str = "") -> Policy:
        """The rules compiled, named as written or by their place ("rules[N]"), after `label` (a route's
        rules: "routes.NAME.")."""
        rules = (
            compile_rule(r.effect, r.when, label + (r.name or f"rules[{n}]"), SAMPLE)
            for n, r in enumerate(self.rules)
        )
        return Policy(
            self.default, tuple(rules), self.approve_destructive, self.approval_ttl_s, self.when_unasked
        )
