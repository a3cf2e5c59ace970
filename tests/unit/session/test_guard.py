"""[policy] in one session (a Dispatcher on memory channels): what a modern client may cache."""

from __future__ import annotations

import trio
from test_dispatch import dispatcher, tool
from test_modern import modern

from actors.policy import PolicyGate
from actors.policy.context import SAMPLE
from actors.policy.rules import Default, Effect, Policy, compile_rule
from actors.protocol.envelopes import BackendCommand, BackendReady
from actors.protocol.messages import Response


async def test_a_policy_makes_every_list_private_even_without_a_token() -> None:
    """The rules may read the address or the listener: a list they filtered is never for a shared cache."""
    rules = Policy(Default.ALLOW, (compile_rule(Effect.DENY, 'mcp.tool.name == "two"', "r", SAMPLE),))
    async with dispatcher(ready=False, policy=PolicyGate(rules)) as h:
        calls, _ = trio.open_memory_channel[BackendCommand](1)
        for name in ("one", "two"):
            h.publish(BackendReady(name, (tool(name),), calls, list_hints={"tools": (5000, "public")}))
        listed = await h.ask(1, "tools/list", modern())
        assert isinstance(listed, Response)
        assert [t["name"] for t in listed.result["tools"]] == ["one"]
        assert (listed.result["ttlMs"], listed.result["cacheScope"]) == (5000, "private")
