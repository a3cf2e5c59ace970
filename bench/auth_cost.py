"""The cost of outbound auth (issue #35): the gateway's CPU per forwarded call to a Streamable HTTP backend
whose credential is an exchanged token, cached (`[backends.auth] kind = "token_exchange"`: the caller's
token exchanged once, then every call served from the broker's cache), over the same gateway's with a
static header (`kind = "static"`). Both gateways serve the lean client over an authenticated WebSocket,
forward to the same lean HTTP backend (bench/backends/lean_http.py, a process of its own beside its token
endpoint, which grants one token for an hour), in interleaved rounds.

    scripts/bench --scenarios auth      (or: .venv/bin/python bench/auth_cost.py)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import jwt
import trio
from clients import CHILD_ENV, Sample, measure, stop_all, websocket_peer
from policy_cost import bearer, free_port

ROOT: Final = Path(__file__).resolve().parent.parent
LEAN_HTTP: Final = ROOT / "bench/backends/lean_http.py"
SECRET_ENV: Final = "BENCH_AUTH_SECRET"
SECRET: Final = "bench-auth-secret-that-is-long-enough"
KEY_ENV: Final = "BENCH_AUTH_BACKEND_KEY"
TOKEN: Final = jwt.encode({"sub": "bench", "exp": 4_000_000_000}, SECRET, "HS256")
TARGET: Final = 1.05  # at most 5 % more gateway CPU per call with a cached exchanged token
PATHS: Final = ("static", "exchanged")


def auth_table(path: str, url: str) -> list[str]:
    if path == "static":
        return ["[backends.auth]", 'kind = "static"', f'secret = {{ env = "{KEY_ENV}" }}']
    return [
        "[backends.auth]",
        'kind = "token_exchange"',
        f'token_url = "{url}/token"',
        'client_id = "bench-gateway"',
        f'client_secret = {{ env = "{KEY_ENV}" }}',
        'audience = ["lean"]',
    ]


def config(folder: Path, path: str, port: int, url: str) -> Path:
    lines = [
        "[[backends]]",
        'name = "b0"',
        f'url = "{url}/mcp"',
        'era = "legacy"',
        *auth_table(path, url),
        "[backends.health]",
        "interval_s = 0",
        "[websocket]",
        f"port = {port}",
        "[websocket.auth]",
        f'jwt_secret_env = "{SECRET_ENV}"',
    ]
    written = folder / f"auth-{path}.toml"
    written.write_text("\n".join(lines) + "\n")
    return written


@contextmanager
def lean_http() -> Iterator[str]:
    """The lean HTTP backend and its token endpoint, in a process of their own: their base URL."""
    process = subprocess.Popen([sys.executable, str(LEAN_HTTP)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(10)


async def auth_cost(
    folder: Path, rounds: int = 5, seconds: float = 1.0, levels: tuple[int, ...] = (1, 8, 32)
) -> dict[str, Any]:
    CHILD_ENV[SECRET_ENV], CHILD_ENV[KEY_ENV] = SECRET, "bench-backend-key-0123456789"
    results: dict[str, Any] = {"target": TARGET, "levels": {}}
    with lean_http() as url:
        async with trio.open_nursery() as nursery:
            peers = {}
            for path in PATHS:
                port = free_port()
                argv = [
                    sys.executable,
                    "-m",
                    "actors",
                    "serve",
                    "--config",
                    str(config(folder, path, port, url)),
                ]
                peers[path] = await websocket_peer(nursery, argv, port, bearer(TOKEN))
            for level in levels:
                samples = {path: Sample() for path in PATHS}
                for _ in range(rounds):
                    for path, peer in peers.items():
                        await measure(peer, level, seconds, samples[path])
                cpu = {path: s.gateway_cpu / max(len(s.latencies), 1) * 1e6 for path, s in samples.items()}
                results["levels"][str(level)] = {
                    "static_cpu_us_per_call": round(cpu["static"], 1),
                    "exchanged_cpu_us_per_call": round(cpu["exchanged"], 1),
                    "ratio": round(cpu["exchanged"] / cpu["static"], 3),
                    "met": cpu["exchanged"] / cpu["static"] <= TARGET,
                    "calls": {path: len(s.latencies) for path, s in samples.items()},
                    "errors": sum(s.errors for s in samples.values()),
                }
            nursery.cancel_scope.cancel()
    return results


def print_auth(result: dict[str, Any]) -> None:
    for level, figures in result["levels"].items():
        met = "met" if figures["met"] else "NOT met"
        print(
            f"auth: {level} in flight: gateway CPU per call {figures['static_cpu_us_per_call']} us with a"
            f" static header, {figures['exchanged_cpu_us_per_call']} us with a cached exchanged token"
            f" ({figures['ratio']:.3f}x; target <= {result['target']}x: {met}; errors {figures['errors']})"
        )


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as folder:
        try:
            print_auth(await auth_cost(Path(folder)))
        finally:
            await stop_all()


if __name__ == "__main__":
    trio.run(main)
