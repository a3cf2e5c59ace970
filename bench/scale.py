"""Two scenarios of issue #27: what a call and a tools/list page cost as the catalog grows (100 backends,
5,000 tools against a tenth of that), and the gateway's RSS over 100,000 forwarded calls.

Both drive real gateway processes over stdio with the lean client and lean backends. The catalogs are
measured side by side, in interleaved rounds (small, big, small, ...), so their ratio holds on a noisy
machine: the catalog's size should change neither a call's routing (one dict lookup by public name) nor a
page (a slice of the published tuple at the cursor's offset, encoded), only the size of what is held.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any, Final

import trio
from clients import STARTED, Peer, stdio_peer
from proctools import cpu_seconds, rss_kib
from scenarios import LEAN, write_config

GATEWAY: Final = [sys.executable, "-m", "actors", "serve", "--stdio", "--config"]
IN_FLIGHT: Final = 8  # calls kept in flight while a catalog's call cost is measured (report.py says so)
RSS_IN_FLIGHT: Final = 32
RSS_STEPS: Final = 10  # RSS read after each tenth of the calls; the first tenth is the warm-up
STOP_S: Final = 30.0


async def catalog_scale(
    folder: Any, sizes: list[tuple[int, int]], rounds: int, calls: int, listings: int
) -> dict[str, Any]:
    """Per catalog (backends x tools each): CPU per routed tools/call to its last tool, CPU and latency of a
    tools/list page (first and last pages), measured in interleaved rounds; and the ratios of the biggest
    catalog's figures to the smallest's."""
    async with trio.open_nursery() as nursery:
        catalogs = []
        for backends, tools_each in sizes:
            argv = [*LEAN_ARGV, "--tools", str(tools_each - 1)]
            config = write_config(folder, f"scale-{backends}x{tools_each}", [argv] * backends)
            peer = await stdio_peer(nursery, [*GATEWAY, str(config)], via_gateway=True)
            catalogs.append(_Catalog(backends, tools_each, peer, STARTED[-1]))
        for catalog in catalogs:
            await catalog.find_last_tool()
        for _ in range(rounds):
            for catalog in catalogs:
                await catalog.measure_calls(calls // rounds)
                await catalog.measure_pages(max(1, listings // rounds))
        results = [catalog.figures() for catalog in catalogs]
        for catalog in catalogs:
            await catalog.stop()
        nursery.cancel_scope.cancel()
    small, big = results[0], results[-1]
    return {
        "catalogs": results,
        "call_cpu_ratio": big["call_cpu_us"] / small["call_cpu_us"],
        "page_cpu_ratio": big["page_cpu_us"] / small["page_cpu_us"],
        "last_page_p50_ratio": big["last_page"]["p50_ms"] / small["last_page"]["p50_ms"],
    }


LEAN_ARGV: Final = [str(LEAN)]


class _Catalog:
    def __init__(self, backends: int, tools_each: int, peer: Peer, process: trio.Process) -> None:
        self.backends, self.tools_each, self.peer, self.process = backends, tools_each, peer, process
        self.last_tool = ""
        self.tools = 0
        self.call_cpu_s = 0.0
        self.calls = 0
        self.errors = 0
        self.page_cpu_s = 0.0
        self.first_pages: list[float] = []
        self.last_pages: list[float] = []
        self.pages = 0

    async def find_last_tool(self) -> None:
        """The catalog's last tool (its last backend's): the name a routed call uses."""
        cursor, tools = None, []
        while True:
            answer = await self.peer.request("tools/list", {"cursor": cursor} if cursor else {})
            tools = answer["result"]["tools"]
            self.tools += len(tools)
            if not (cursor := answer["result"].get("nextCursor")):
                break
        self.last_tool = tools[-1]["name"]

    async def measure_calls(self, calls: int) -> None:
        left = calls
        before = cpu_seconds(self.process.pid)

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                answer = await self.peer.request("tools/call", {"name": self.last_tool, "arguments": {}})
                self.errors += "result" not in answer

        async with trio.open_nursery() as nursery:
            for _ in range(IN_FLIGHT):
                nursery.start_soon(worker)
        self.call_cpu_s += cpu_seconds(self.process.pid) - before
        self.calls += calls

    async def measure_pages(self, listings: int) -> None:
        before = cpu_seconds(self.process.pid)
        for _ in range(listings):
            cursor, first = None, True
            while True:
                sent = trio.current_time()
                answer = await self.peer.request("tools/list", {"cursor": cursor} if cursor else {})
                took = trio.current_time() - sent
                self.pages += 1
                cursor = answer["result"].get("nextCursor")
                if first:
                    self.first_pages.append(took)
                    first = False
                if not cursor:
                    self.last_pages.append(took)
                    break
        self.page_cpu_s += cpu_seconds(self.process.pid) - before

    def figures(self) -> dict[str, Any]:
        return {
            "backends": self.backends,
            "tools": self.tools,
            "calls": self.calls,
            "errors": self.errors,
            "call_cpu_us": self.call_cpu_s / self.calls * 1e6,
            "pages": self.pages,
            "page_cpu_us": self.page_cpu_s / self.pages * 1e6,
            "first_page": _p50_ms(self.first_pages),
            "last_page": _p50_ms(self.last_pages),
            "rss_mib": rss_kib(self.process.pid) / 1024,
        }

    async def stop(self) -> None:
        assert self.peer.close is not None
        await self.peer.close()
        with trio.move_on_after(STOP_S):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()


def _p50_ms(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(samples) * 1000 if samples else float("nan")}


async def rss_over_calls(folder: Any, calls: int) -> dict[str, Any]:
    """The gateway's RSS after each tenth of `calls` forwarded calls (lean client and backend, 32 in
    flight): what it holds should not grow with the calls it has served once it is warm."""
    config = write_config(folder, "rss", [LEAN_ARGV])
    step = max(1, calls // RSS_STEPS)
    async with trio.open_nursery() as nursery:
        peer = await stdio_peer(nursery, [*GATEWAY, str(config)], via_gateway=True)
        process = STARTED[-1]
        rss_mib, errors, done = [], 0, 0
        for _ in range(RSS_STEPS):
            left = step

            async def worker() -> None:
                nonlocal left, errors
                while left > 0:
                    left -= 1
                    errors += not await peer.call_echo()

            async with trio.open_nursery() as calling:
                for _ in range(RSS_IN_FLIGHT):
                    calling.start_soon(worker)
            done += step
            rss_mib.append(rss_kib(process.pid) / 1024)
        assert peer.close is not None
        await peer.close()
        with trio.move_on_after(STOP_S):
            await process.wait()
        nursery.cancel_scope.cancel()
    return {
        "calls": done,
        "errors": errors,
        "rss_mib": rss_mib,  # after each tenth
        "warm_mib": rss_mib[0],
        "last_mib": rss_mib[-1],
        "growth_mib": rss_mib[-1] - rss_mib[0],
    }
