"""[policy] and [[policy.rules]] as written; load.py compiles each rule (actors.policy.rules), so a rule
that does not compile is reported as `FILE: policy.rules[N].when: reason` by `check` and at start."""

from __future__ import annotations

from typing import Any

import attrs

from actors.config.checks import not_blank
from actors.policy.rules import Default, Effect


@attrs.frozen(kw_only=True)
class PolicyTable:
    """[policy]."""

    default: Default = Default.ALLOW  # what a request gets when no allow rule holds
    rules: Any = ()  # [[policy.rules]], each a RuleTable (structured one by one, for its key)


@attrs.frozen(kw_only=True)
class RuleTable:
    """[[policy.rules]]."""

    effect: Effect = Effect.ALLOW
    when: str  # a CEL expression over jwt, scopes, principal, source and mcp (actors/policy/context.py)
    name: str | None = attrs.field(default=None, validator=attrs.validators.optional(not_blank))
