"""The gateway's policy as sessions use it: the compiled rules of the config in force (swapped whole by a
reload), each decision counted, and the lists each caller may see cached per list version.

Owns: the cache of filtered lists (at most MAX_CACHED, the least recently used dropped first; emptied by a
swap), and the decisions kept per caller and target and the approvals per caller and tool (each at most
MAX_DECISIONS, started afresh when full; emptied by a swap). One per gateway, shared by its sessions; used
only from Trio tasks of the one thread.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Final

import attrs

from actors.policy.context import Caller, Target
from actors.policy.narrowed import NarrowedPolicy
from actors.policy.rules import ALLOWED_WITHOUT_POLICY, Decision, Policy
from actors.policy.run import Item, RuleRun, filter_items

MAX_CACHED: Final = 512  # filtered lists kept: (caller, list kind, version); a new caller's costs one pass
# Decisions kept, by (caller, target): a rule is a pure function of what it sees, so the same caller naming
# the same target gets the same answer until the rules change. Past the cap the table starts afresh.
MAX_DECISIONS: Final = 8192
# A decision on a target naming more than this (a resource URI can be 8192 characters of the client's
# choosing) is made each time, not kept: one client's long URIs would otherwise hold MAX_DECISIONS of them.
MAX_KEPT_TARGET_CHARS: Final = 512
METHODS: Final = frozenset(
    {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "completion/complete",
    }
)  # the label values /metrics may show; anything else counts as "other"


@attrs.define(eq=False)
class PolicyGate:
    policy: Policy | NarrowedPolicy | None = None  # a route's gate: the gateway's narrowed by the route's
    generation: int = 0  # bumped by every swap: part of each filtered list's version
    decisions: Counter[tuple[str, str]] = attrs.field(factory=Counter)  # (method, allow|deny) -> count
    _visible: OrderedDict[tuple[str, str, int], tuple[Item, ...]] = attrs.field(factory=OrderedDict)
    _decided: dict[tuple[str, str, str, str, str, str], Decision] = attrs.field(factory=dict)
    _approvals: dict[tuple[str, str, str], Decision | None] = attrs.field(factory=dict)  # by caller, tool

    def swap(self, policy: Policy | NarrowedPolicy | None) -> None:
        """A reload's new rules, in force from the next request on (one assignment: never half of each)."""
        if policy == self.policy:
            return
        self.policy = policy
        self.generation += 1
        self._visible.clear()
        self._decided.clear()
        self._approvals.clear()

    def decide(self, caller: Caller, target: Target) -> Decision:
        policy = self.policy
        if policy is None:
            return ALLOWED_WITHOUT_POLICY
        key = (caller.fingerprint, target.method, target.backend, target.tool, target.prompt, target.uri)
        decision = self._decided.get(key)
        if decision is None:
            decision = policy.evaluate(RuleRun(policy, caller, target))
            if len(target.tool) + len(target.prompt) + len(target.uri) <= MAX_KEPT_TARGET_CHARS:
                if len(self._decided) >= MAX_DECISIONS:
                    self._decided.clear()
                self._decided[key] = decision
        method = target.method if target.method in METHODS else "other"
        self.decisions[(method, decision.word)] += 1
        return decision

    def approval(self, caller: Caller, target: Target) -> Decision | None:
        """Whether a tools/call the rules allowed needs the user's approval: the approve rule that holds
        (allowed), one that failed (not allowed: an error denies), or None. Kept per caller and tool as
        decisions are, unless an approve rule reads the call's arguments."""
        policy = self.policy
        if policy is None or not policy.approves:
            return None
        if policy.approves_by_arguments or len(target.tool) > MAX_KEPT_TARGET_CHARS:
            decision = policy.approval(RuleRun(policy, caller, target))
        else:
            key = (caller.fingerprint, target.backend, target.tool)
            if key in self._approvals:
                decision = self._approvals[key]
            else:
                decision = policy.approval(RuleRun(policy, caller, target))
                if len(self._approvals) >= MAX_DECISIONS:
                    self._approvals.clear()
                self._approvals[key] = decision
        if decision is not None:
            self.decisions[("tools/call", "approve" if decision.allowed else "deny")] += 1
        return decision

    def version(self, list_version: int) -> int:
        """A filtered list's version: its catalog version and the rules' generation (cursors follow both)."""
        return list_version << 16 | self.generation & 0xFFFF

    def visible(
        self,
        caller: Caller,
        kind: str,
        list_version: int,
        items: tuple[Item, ...],
        target_of: Callable[[Item], Target | None],
    ) -> tuple[Item, ...]:
        """The items of one list this caller may see (an item with no target is hidden), computed once per
        caller, list version and rules."""
        policy = self.policy
        if policy is None:
            return items
        key = (caller.fingerprint, kind, list_version)
        cached = self._visible.get(key)
        if cached is not None:
            self._visible.move_to_end(key)
            return cached
        visible = self._visible[key] = filter_items(policy, caller, items, target_of)
        if len(self._visible) > MAX_CACHED:
            self._visible.popitem(last=False)
        return visible
