"""Running the rules on a request: one decision (`RuleRun`, for calls, with the rule that decided) or a
whole list at once (`filter_items`, for listings: which items a caller may see).

A rule runs in Python where it has a Python reading and the values make its answer certain
(actors/policy/fast.py), else on the CEL engine, whose context for a request is set up once, on the first
rule that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from actors.policy.context import Caller, Target, engine_context, readable
from actors.policy.fast import Fallback
from actors.policy.narrowed import NarrowedPolicy
from actors.policy.rules import Default, Effect, Policy, Rule

Item = Mapping[str, Any]
FAILED: Final = object()  # a rule that raised: it denies, like a value that is not a boolean


@attrs.define(slots=True)
class RuleRun:
    """One request's rule values, for Policy.evaluate (which turns a raised error into a denial)."""

    policy: Policy | NarrowedPolicy
    caller: Caller
    target: Target | None
    variables: dict[str, Any] | None = None
    engine_ready: bool = False

    def __call__(self, rule: Rule) -> Any:
        if rule.fast is not None:
            variables = self.variables
            if variables is None:
                variables = self.variables = dict(self.caller.variables)
                if self.target is not None:
                    variables["mcp"] = self.target.variables()
            try:
                return rule.fast(variables)
            except (Fallback, RecursionError):
                pass  # not certain in Python: the engine decides
        return rule.program.execute(self.engine())

    def engine(self) -> Any:
        """The engine's context for this request: the caller's, with this target's `mcp` set once."""
        context = engine_context(self.caller)
        if self.target is not None and not self.engine_ready:
            mcp = self.target.variables(self.policy.mcp_keys)
            if self.target.arguments:  # a call's, for approve rules: the engine refuses a lone surrogate
                mcp = readable(mcp)
            context.add_variable("mcp", mcp)
            self.engine_ready = True  # the engine context keeps it for this request's other rules
        return context

    def value(self, rule: Rule) -> Any:
        """The rule's value, or FAILED when it raised."""
        try:
            return self(rule)
        except Exception:
            return FAILED


def filter_items(
    policy: Policy | NarrowedPolicy,
    caller: Caller,
    items: tuple[Item, ...],
    target_of: Callable[[Item], Target | None],
) -> tuple[Item, ...]:
    """The items whose target Policy.evaluate would allow for `caller` (an item with no target is hidden),
    with the rules that read no target run once for the list instead of once per item.

    Only `allowed` matters here, and it does not depend on which rule decides: an item is hidden when any
    deny holds or fails, when any require does not hold, or when, walking the allows in order, the first
    that does not give false fails; it is shown when that first one holds, and by the default when all give
    false. So the caller-only rules settle the list (a deny, a require) or end the allow walk (an allow that
    holds or fails), and each item runs only the target rules left."""
    if isinstance(policy, NarrowedPolicy):  # a route's: what both policies allow
        allowed = filter_items(policy.outer, caller, items, target_of)
        return filter_items(policy.inner, caller, allowed, target_of)
    once = RuleRun(policy, caller, None)
    denies: list[Rule] = []
    requires: list[Rule] = []
    allows: list[Rule] = []  # the target allows walked before the walk's end
    ending: Any = policy.default is Default.ALLOW  # the walk's end: the default, or a caller-only allow's
    walking = True
    for rule in policy.rules:
        if rule.effect is Effect.APPROVE:
            continue  # a call that needs approval is listed: the user is asked when it is called
        if rule.effect is Effect.ALLOW:
            if not walking:
                continue
            if rule.reads_target:
                allows.append(rule)
                continue
            value = once.value(rule)
            if value is not False:  # holds (shown) or fails (hidden): the walk ends here for every item
                ending, walking = value is True, False
        elif rule.reads_target:
            (denies if rule.effect is Effect.DENY else requires).append(rule)
        else:
            value = once.value(rule)
            if (rule.effect is Effect.DENY and value is not False) or (
                rule.effect is Effect.REQUIRE and value is not True
            ):
                return ()  # the caller may see nothing of this list
    shown = []
    variables = dict(caller.variables)  # one dict for the list: each item sets its own `mcp`
    for item in items:
        target = target_of(item)
        if target is None:
            continue
        variables["mcp"] = target.variables()
        run = RuleRun(policy, caller, target, variables)
        if any(run.value(rule) is not False for rule in denies):
            continue
        if any(run.value(rule) is not True for rule in requires):
            continue
        allowed = ending
        for rule in allows:
            value = run.value(rule)
            if value is not False:
                allowed = value is True
                break
        if allowed:
            shown.append(item)
    return tuple(shown)
