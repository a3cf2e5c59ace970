"""The cost of [policy] and [limits] (issue #26): the gateway's CPU per forwarded call over an authenticated
WebSocket, with auth alone and with auth, 10 policy rules and limits on (limits high enough to refuse
nothing), interleaved rounds on the lean client and backend; and the time of a tools/list of 500 tools
filtered by those rules, the first (every rule run per tool) and the next ones (cached per caller).

    scripts/bench --scenarios policy      (or: .venv/bin/python bench/policy_cost.py)
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

import jwt
import trio
from clients import CHILD_ENV, Peer, Sample, measure, stop_all, websocket_peer

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN: Final = ROOT / "bench/backends/lean_echo.py"
SECRET_ENV: Final = "BENCH_POLICY_SECRET"
SECRET: Final = "bench-policy-secret-that-is-long-enough"
TOKEN: Final = jwt.encode({"sub": "bench", "scope": "tools:call", "groups": ["eng"]}, SECRET, "HS256")
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
        started = trio.current_time()
        answer = await peer.request("tools/list", {})
        times.append((trio.current_time() - started) * 1000)
        assert len(answer["result"]["tools"]) == 500, "the rules let every bench tool through"
    return times


async def policy_cost(
    folder: Path, rounds: int = 5, seconds: float = 1.0, levels: tuple[int, ...] = (1, 8)
) -> dict[str, Any]:
    CHILD_ENV[SECRET_ENV] = SECRET
    results: dict[str, Any] = {"rules": len(RULES), "levels": {}}
    async with trio.open_nursery() as nursery:
        peers = {}
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
            peers[name] = await websocket_peer(nursery, argv, port, [("authorization", f"Bearer {TOKEN}")])
        listings = await list_times_ms(peers["auth+policy+limits"], 6)
        plain = await list_times_ms(peers["auth"], 6)
        results["tools_list_500_ms"] = {
            "first": round(listings[0], 2),
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
        f"policy: tools/list of 500 tools under {result['rules']} rules: first {listing['first']} ms, then "
        f"{listing['cached_median']} ms (without [policy]: {listing['without_policy_median']} ms)"
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
