"""The cost of [policy] and [limits] (issue #26): the gateway's CPU per forwarded call over an authenticated
WebSocket, with auth alone and with auth, 10 policy rules and limits on (limits high enough to refuse
nothing), interleaved rounds on the lean client and backend; and the time of a tools/list of 500 tools
filtered by those rules, the first (every rule run per tool) and the next ones (cached per caller).

    scripts/bench --scenarios policy      (or: .venv/bin/python bench/policy_cost.py)
"""

from __future__ import annotations

import gc
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import jwt
import trio
from clients import CHILD_ENV, Peer, Sample, measure, stop_all, websocket_peer, websocket_session

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
SECRET_ENV: Final = "BENCH_POLICY_SECRET"
SECRET: Final = "bench-policy-secret-that-is-long-enough"
CLAIMS: Final = {"sub": "bench", "scope": "tools:call", "groups": ["eng"]}
TOKEN: Final = jwt.encode(CLAIMS, SECRET, "HS256")
FIRST_LISTINGS: Final = 7  # callers whose first tools/list is timed (the median is reported)
RULES: Final = [  # 10 rules of the kinds operators write: names, scopes, groups, the subject
    *(("deny", f'mcp.tool.name == "forbidden_{n}"') for n in range(4)),
    ("require", '"tools:call" in scopes'),
    ("require", 'principal.subject != ""'),
    ("allow", '"admins" in jwt.groups'),
    ("allow", 'mcp.tool.name.startsWith("tool_") && "eng" in jwt.groups'),
    ("allow", 'mcp.tool.name == "echo"'),
    ("allow", 'source.listener == "stdio"'),
]
GUARDS: Final = [
    "[policy]",
    'default = "deny"',
    *(
        line
        for effect, when in RULES
        for line in ("[[policy.rules]]", f'effect = "{effect}"', f"when = '{when}'")
    ),
    "[limits]",
    "calls_per_s = 1000000.0",
    "burst = 1000000",
    "max_inflight = 10000",
]


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(folder: Path, name: str, port: int, tools: int, guarded: bool) -> Path:
    lines = [
        "[gateway]",
        "page_size = 1000",
        "[[backends]]",
        'name = "b0"',
        f'command = "{sys.executable}"',
        f'args = ["{LEAN}", "--tools", "{tools}"]',
        'era = "legacy"',
        "[backends.health]",
        "interval_s = 0",
        "[websocket]",
        f"port = {port}",
        "[websocket.auth]",
        f'jwt_secret_env = "{SECRET_ENV}"',
        *(GUARDS if guarded else []),
    ]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def list_times_ms(peer: Peer, listings: int) -> list[float]:
    times = []
    for _ in range(listings):
        gc.collect()  # not in the timed request: a collection of this process's heap took 40 ms here
        started = trio.current_time()
        answer = await peer.request("tools/list", {})
        times.append((trio.current_time() - started) * 1000)
        assert len(answer["result"]["tools"]) == 500, "the rules let every bench tool through"
    return times


def filter_times_ms(tools: int = 500, callers: int = 20) -> list[float]:
    """The rules' own cost in a listing: 500 tools filtered by RULES in this process, each time for a
    new caller (nothing cached), as the gateway does once per caller and catalog version."""
    from actors.policy import Caller, Target
    from actors.policy.context import SAMPLE
    from actors.policy.rules import Default, Effect, Policy, compile_rule
    from actors.policy.run import filter_items

    rules = tuple(
        compile_rule(Effect(effect), when, f"rules[{n}]", SAMPLE) for n, (effect, when) in enumerate(RULES)
    )
    policy = Policy(Default.DENY, rules)
    items = tuple({"name": f"tool_{n}"} for n in range(tools))
    times = []
    for n in range(callers):
        caller = Caller(subject=f"bench-{n}", claims={**CLAIMS, "sub": f"bench-{n}"}, scopes=("tools:call",))
        gc.collect()
        started = time.perf_counter()
        shown = filter_items(policy, caller, items, lambda i: Target("tools/call", "b0", tool=i["name"]))
        times.append((time.perf_counter() - started) * 1000)
        assert len(shown) == tools
    return times


async def policy_cost(
    folder: Path, rounds: int = 5, seconds: float = 1.0, levels: tuple[int, ...] = (1, 8)
) -> dict[str, Any]:
    CHILD_ENV[SECRET_ENV] = SECRET
    results: dict[str, Any] = {"rules": len(RULES), "levels": {}}
    async with trio.open_nursery() as nursery:
        peers, ports = {}, {}
        for name, guarded in (("auth", False), ("auth+policy+limits", True)):
            port = free_port()
            argv = [
                sys.executable,
                "-m",
                "actors",
                "serve",
                "--config",
                str(config(folder, name, port, 499, guarded)),
            ]
            ports[name] = port
            peers[name] = await websocket_peer(nursery, argv, port, bearer(TOKEN))
        listings = await list_times_ms(peers["auth+policy+limits"], 6)
        plain = await list_times_ms(peers["auth"], 6)
        firsts = [listings[0]]  # a caller's first listing runs the rules per tool: time several callers
        for n in range(FIRST_LISTINGS - 1):
            other = jwt.encode({**CLAIMS, "sub": f"bench-{n}"}, SECRET, "HS256")
            session = await websocket_session(nursery, ports["auth+policy+limits"], bearer(other))
            firsts += (await list_times_ms(session, 1))[:1]
        filtering = filter_times_ms()
        results["tools_list_500_ms"] = {
            "filter_median": round(statistics.median(filtering), 2),
            "filter_max": round(max(filtering), 2),
            "first": round(statistics.median(firsts), 2),
            "first_max": round(max(firsts), 2),
            "firsts": [round(f, 2) for f in firsts],
            "without_policy_first": round(plain[0], 2),
            "cached_median": round(statistics.median(listings[1:]), 2),
            "without_policy_median": round(statistics.median(plain[1:]), 2),
        }
        for level in levels:
            samples = {name: Sample() for name in peers}
            for _ in range(rounds):
                for name, peer in peers.items():
                    await measure(peer, level, seconds, samples[name])
            cpu = {name: s.gateway_cpu / len(s.latencies) * 1e6 for name, s in samples.items()}
            results["levels"][str(level)] = {
                "auth_cpu_us_per_call": round(cpu["auth"], 1),
                "guarded_cpu_us_per_call": round(cpu["auth+policy+limits"], 1),
                "increase_percent": round((cpu["auth+policy+limits"] / cpu["auth"] - 1) * 100, 1),
                "errors": sum(s.errors for s in samples.values()),
            }
        nursery.cancel_scope.cancel()
    return results


def print_policy(result: dict[str, Any]) -> None:
    listing = result["tools_list_500_ms"]
    print(
        f"policy: tools/list of 500 tools, {result['rules']} rules: a caller's first {listing['first']} ms"
        f" (median of {FIRST_LISTINGS} callers, at most {listing['first_max']} ms), then "
        f"{listing['cached_median']} ms (without [policy]: {listing['without_policy_median']} ms)"
    )
    print(
        f"policy: filtering 500 tools by the {result['rules']} rules for a new caller (in-process): "
        f"{listing['filter_median']} ms (at most {listing['filter_max']} ms)"
    )
    for level, figures in result["levels"].items():
        print(
            f"policy: {level} in flight: gateway CPU per call {figures['auth_cpu_us_per_call']} us with "
            f"auth, {figures['guarded_cpu_us_per_call']} us with auth, rules and limits "
            f"({figures['increase_percent']:+.1f} %; errors {figures['errors']})"
        )


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-policy-") as folder:
        try:
            print_policy(await policy_cost(Path(folder)))
        finally:
            await stop_all()


if __name__ == "__main__":
    trio.run(main)
