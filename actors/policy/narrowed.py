"""A route's own [routes.policy] over the gateway's [policy]: both must allow.

A request through a route is judged by the gateway's rules first and, when they allow it, by the route's;
a denial names the rule that denied it (the route's rules are named `routes.NAME.rules[N]` or as written).
A tools/call needs approval when either policy's approve rules (or `approve_destructive`) ask for it; the
stricter of each approval setting holds (the shorter wait, `refuse` over `allow` for a client that cannot
be asked). A route cannot widen the gateway's policy: it only takes away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from actors.policy.rules import Decision, Policy, Rule, Unasked


@attrs.frozen
class NarrowedPolicy:
    """The gateway's policy (`outer`) and a route's (`inner`), read as one by the gate and approvals."""

    outer: Policy
    inner: Policy
    mcp_keys: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    approves: tuple[Rule, ...] = attrs.field(init=False, eq=False, repr=False)
    approves_by_arguments: bool = attrs.field(init=False, eq=False, repr=False)
    asks: bool = attrs.field(init=False, eq=False, repr=False)
    approve_destructive: bool = attrs.field(init=False, eq=False, repr=False)
    approval_ttl_s: float = attrs.field(init=False, eq=False, repr=False)
    when_unasked: Unasked = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        outer, inner = self.outer, self.inner
        derived = {
            "mcp_keys": outer.mcp_keys | inner.mcp_keys,
            "approves": outer.approves + inner.approves,
            "approves_by_arguments": outer.approves_by_arguments or inner.approves_by_arguments,
            "asks": outer.asks or inner.asks,
            "approve_destructive": outer.approve_destructive or inner.approve_destructive,
            "approval_ttl_s": min(outer.approval_ttl_s, inner.approval_ttl_s),
            "when_unasked": Unasked.REFUSE
            if Unasked.REFUSE in (outer.when_unasked, inner.when_unasked)
            else Unasked.ALLOW,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def parts(self) -> tuple[Policy, Policy]:
        return self.outer, self.inner

    def evaluate(self, run: Callable[[Rule], Any]) -> Decision:
        decision = self.outer.evaluate(run)
        if not decision.allowed:
            return decision
        narrowed = self.inner.evaluate(run)
        return decision if narrowed.allowed else narrowed

    def approval(self, run: Callable[[Rule], Any]) -> Decision | None:
        """The gateway's approval first (a failed one denies), then the route's."""
        decision = self.outer.approval(run)
        return decision if decision is not None else self.inner.approval(run)


def narrowed(outer: Policy | None, inner: Policy | None) -> Policy | NarrowedPolicy | None:
    """What a route's sessions are judged by: the gateway's policy, narrowed by the route's if any."""
    if inner is None:
        return outer
    if outer is None:
        return inner
    return NarrowedPolicy(outer, inner)
