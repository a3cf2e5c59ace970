"""[policy] and [[policy.rules]] as written. Each rule's `when` is compiled as it is read (its validator),
so a rule that does not compile is reported as `FILE: policy.rules[N].when: reason` by `check` and at
start; `PolicyTable.compiled()` is what sessions use (actors.policy.rules)."""

from __future__ import annotations

from typing import Any

import attrs

from actors.config.checks import not_blank
from actors.policy.context import SAMPLE
from actors.policy.rules import Default, Effect, Policy, compile_rule


def _compiles(_instance: Any, _attribute: Any, when: str) -> None:
    compile_rule(Effect.ALLOW, when, "", SAMPLE)  # ValueError with the reason when it does not


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

    def compiled(self) -> Policy:
        """The rules compiled, named as written or by their place ("rules[N]")."""
        rules = (
            compile_rule(r.effect, r.when, r.name or f"rules[{n}]", SAMPLE) for n, r in enumerate(self.rules)
        )
        return Policy(self.default, tuple(rules))
