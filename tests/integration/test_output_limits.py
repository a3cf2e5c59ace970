"""Output limits and MCP Apps through one gateway process (shared by the module), with the official SDK
client in both eras over Streamable HTTP, and two real SDK backends serving the same tools and app: alpha
spoken to in the handshake era, beta in 2026-07-28. So every call below crosses an era bridge for one of
the two clients, and beta's colliding names show the namespacing (`beta__tool`, `ui://beta/...`); beta's
app tool is renamed ([backends.tools] rename), as an operator (or, later, a route) may rename it.

The 5 MB results are made by the backend (tests/backends/output_backend.py), never stored. Memory is
checked by the gateway's peak resident size (VmHWM), a bound in bytes, never by timing."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support import DEADLINE_S, ROOT, free_port, serving_gateway, write_config

from actors.output.limits import SIZE_META_KEY

BACKEND: Final = ROOT / "tests" / "backends" / "output_backend.py"
MODERN: Final = "2026-07-28"
ERAS: Final = ("legacy", MODERN)
FIVE_MB: Final = 5 * 1024 * 1024
FIFTY_MB: Final = 50 * 1024 * 1024  # the -m extra tier's result
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024  # a 50 MB answer must be read whole to be cut
GATEWAY_LIMIT: Final = 20_000
TEXT_LIMIT: Final = 100_000  # alpha's big_text's own, above the gateway's and above Claude Code's default
APP: Final = "ui://widget/app.html"
BETA_APP: Final = "ui://beta/widget/app.html"
ROUTE: Final = """
[[routes]]
name = "apps"
paths = ["/apps"]
include = ["open_beta_app", "beta__big_text", "ui://*"]
max_output_chars = 1000
[routes.tools.open_beta_app]
name = "beta_widget"
"""  # the app tool renamed again by a route, beta's app readable through it, a route's own output limit
POLICY: Final = """
[policy]
[[policy.rules]]
name = "not alpha's app"
effect = "deny"
when = 'mcp.resource.uri == "ui://widget/app.html"'
"""


def backend(name: str, era: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(BACKEND), "--name", name],
        "era": era,
        **extra,
    }


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int]]:
    """One gateway for the module: its HTTP URL, its pid, its peak memory once started (bytes)."""
    folder = tmp_path_factory.mktemp("output")
    port = free_port()
    backends = [
        backend("alpha", "legacy"),
        backend("beta", "modern", tools={"rename": {"show_app": "open_beta_app"}}),
    ]
    config = write_config(
        folder / "g.toml", backends, max_output_chars=GATEWAY_LIMIT, max_message_bytes=MAX_MESSAGE_BYTES
    )
    text = config.read_text().replace(
        'name = "alpha"', f'name = "alpha"\ntools = {{ max_output_chars = {{ big_text = {TEXT_LIMIT} }} }}'
    )
    config.write_text(text + POLICY + f"\n[http]\nport = {port}\n" + ROUTE)
    log = folder / "g.log"
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config), "--log-file", str(log)]
    with serving_gateway(argv, port) as process:
        url = f"http://127.0.0.1:{port}/mcp"
        trio.run(list_once, url)  # the backends are up: what follows is the results' cost alone
        yield url, process.pid, peak_rss_bytes(process.pid)


async def list_once(url: str) -> None:
    async with client(url, "legacy") as session:
        assert "open_beta_app" in [tool.name for tool in (await session.list_tools()).tools]


@asynccontextmanager
async def client(url: str, era: str) -> AsyncIterator[Client]:
    transport: Any = streamable_http_client(url) if era == "legacy" else url
    with trio.fail_after(DEADLINE_S):
        async with Client(transport, mode=era) as connected:
            yield connected


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def dumped(result: Any) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True)


# --- output limits ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_5mb_text_is_cut_to_the_limit_keeping_head_and_tail(
    gateway: tuple[str, int, int], era: str
) -> None:
    url, _, _ = gateway
    async with client(url, era) as session:
        for tool, limit in (("big_text", TEXT_LIMIT), ("beta__big_text", GATEWAY_LIMIT)):
            result = await session.call_tool(tool, {"chars": FIVE_MB})
            text = result.content[0].text  # type: ignore[union-attr]
            assert len(text) == limit, (era, tool)
            assert text.startswith("HEAD...") and text.endswith("...TAIL")
            assert f"the text had {FIVE_MB:,} characters, more than the limit of {limit:,}" in text
            assert not result.is_error
        small = await session.call_tool("beta__big_text", {"chars": 100})
        assert len(small.content[0].text) == 100  # type: ignore[union-attr]  # under the limit: untouched


@pytest.mark.parametrize("era", ERAS)
async def test_5mb_structured_content_becomes_an_error_naming_size_and_limit(
    gateway: tuple[str, int, int], era: str
) -> None:
    url, _, _ = gateway
    async with client(url, era) as session:
        for tool in ("big_structured", "beta__big_structured"):
            result = await session.call_tool(tool, {"chars": FIVE_MB})
            assert result.is_error and result.structured_content is None, (era, tool)
            [item] = result.content
            size = FIVE_MB + len('{"data":""}')
            assert f"{size:,} characters of JSON, more than the limit of {GATEWAY_LIMIT:,}" in item.text  # type: ignore[union-attr]
            assert f"tool '{tool}'" in item.text  # type: ignore[union-attr]  # as the client named it
        fits = await session.call_tool("beta__big_structured", {"chars": 100})
        assert fits.structured_content == {"data": "s" * 100} and not fits.is_error


async def test_memory_while_cutting_is_bounded(gateway: tuple[str, int, int]) -> None:
    """A 5 MB result costs the gateway's peak memory a few copies of it, once: it is held about once while
    it is cut (framing/lines.py takes the line in one copy, backends/connection.py drops it before the next
    read), and nothing of it is kept, so more of them, through both eras, raise the peak no further."""
    url, pid, before = gateway
    async with client(url, "legacy") as legacy, client(url, MODERN) as modern:
        await legacy.call_tool("big_text", {"chars": FIVE_MB})
        once = peak_rss_bytes(pid)
        for session in (modern, legacy):  # each era's path to each backend once: the peak settles
            await session.call_tool("beta__big_text", {"chars": FIVE_MB})
        first = peak_rss_bytes(pid)
        for session in (legacy, modern, modern, legacy):
            await session.call_tool("beta__big_text", {"chars": FIVE_MB})
        after = peak_rss_bytes(pid)
    assert once - before < 5 * FIVE_MB, f"one 5 MiB result: peak +{(once - before) / 2**20:.1f} MiB"
    # a kept copy would add 5 MiB per call (20 MiB); on a busy machine a result's chunks may wait in the
    # read buffer beside the last one's cut, once (measured: +5.0-5.5 MiB in 1 run of 3 under load)
    assert after - first < 2 * FIVE_MB, f"four more: peak +{(after - first) / 2**20:.1f} MiB"


@pytest.mark.extra
async def test_a_50mb_result_costs_a_few_copies_while_it_is_decoded_and_none_after(
    gateway: tuple[str, int, int],
) -> None:
    """The issue's case: a 50 MB result. Its peak is its decoding's (the line, orjson's work and the
    decoded text: about 3 copies, measured 150 MiB); after the cut nothing on the path copies it again."""
    url, pid, before = gateway
    async with client(url, MODERN) as session:
        result = await session.call_tool("big_text", {"chars": FIFTY_MB})
    assert len(result.content[0].text) == TEXT_LIMIT  # type: ignore[union-attr]
    grown = peak_rss_bytes(pid) - before
    assert grown < 4 * FIFTY_MB, f"one 50 MiB result: peak +{grown / 2**20:.1f} MiB"


# --- MCP Apps ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_apps_keep_their_scheme_and_are_named_publicly_everywhere(
    gateway: tuple[str, int, int], era: str
) -> None:
    url, _, _ = gateway
    async with client(url, era) as session:
        tools = {tool.name: dumped(tool) for tool in (await session.list_tools()).tools}
        beta = tools["open_beta_app"]["_meta"]
        assert beta["ui"] == {"resourceUri": BETA_APP, "visibility": ["model", "app"]}
        assert beta["ui/resourceUri"] == BETA_APP
        assert tools["big_text"]["_meta"][SIZE_META_KEY] == TEXT_LIMIT  # raised above Claude Code's default
        assert SIZE_META_KEY not in tools["beta__big_text"].get("_meta", {})
        listed = {str(resource.uri) for resource in (await session.list_resources()).resources}
        assert BETA_APP in listed
        read = await session.read_resource(BETA_APP)  # what a host does with the tool's reference
        assert read.contents[0].text == "<html><body>beta's app</body></html>"  # type: ignore[union-attr]
        assert str(read.contents[0].uri) == BETA_APP

        shown = dumped(await session.call_tool("open_beta_app", {}))  # an app's call, by its renamed name
        text, link, embedded, plain = shown["content"]
        assert text["text"] == "beta: app shown"  # reached beta
        assert link["uri"] == BETA_APP and embedded["resource"]["uri"] == BETA_APP
        assert plain["uri"] == "file:///elsewhere.txt"  # nobody else's: bare
        assert (
            shown["_meta"]["ui"]["resourceUri"] == BETA_APP and shown["_meta"]["ui/resourceUri"] == BETA_APP
        )


@pytest.mark.parametrize("era", ERAS)
async def test_an_app_the_caller_may_not_read_is_not_pointed_at(
    gateway: tuple[str, int, int], era: str
) -> None:
    """The policy denies reading alpha's app (bare: alpha is first): its tool and results stop naming it."""
    url, _, _ = gateway
    async with client(url, era) as session:
        tools = {tool.name: dumped(tool) for tool in (await session.list_tools()).tools}
        meta = tools["show_app"]["_meta"]
        assert meta["ui"] == {"visibility": ["model", "app"]} and "ui/resourceUri" not in meta
        shown = dumped(await session.call_tool("show_app", {}))
        assert shown["content"][0]["text"] == "alpha: app shown"
        assert [item["type"] for item in shown["content"]] == ["text", "resource_link"]  # the app's two gone
        assert shown["content"][1]["uri"] == "file:///elsewhere.txt"
        assert "resourceUri" not in shown["_meta"]["ui"] and "ui/resourceUri" not in shown["_meta"]
        assert APP not in {str(resource.uri) for resource in (await session.list_resources()).resources}
        with pytest.raises(MCPError, match="not found"):
            await session.read_resource(APP)


@pytest.mark.parametrize("era", ERAS)
async def test_an_app_tool_renamed_by_a_route_keeps_its_app_and_reaches_its_backend(
    gateway: tuple[str, int, int], era: str
) -> None:
    url, _, _ = gateway
    async with client(url.replace("/mcp", "/apps"), era) as session:
        tools = {tool.name: dumped(tool) for tool in (await session.list_tools()).tools}
        assert sorted(tools) == ["beta__big_text", "beta_widget"]  # not open_beta_app, not alpha's tools
        meta = tools["beta_widget"]["_meta"]
        assert meta["ui"]["resourceUri"] == BETA_APP and meta["ui/resourceUri"] == BETA_APP
        assert SIZE_META_KEY not in meta  # the route's limit (1000) is below a client's default
        read = await session.read_resource(BETA_APP)  # the host reads the app through the same route
        assert read.contents[0].text == "<html><body>beta's app</body></html>"  # type: ignore[union-attr]
        shown = dumped(await session.call_tool("beta_widget", {}))  # the app's call, by the route's name
        text, link, embedded, _ = shown["content"]
        assert text["text"] == "beta: app shown" and link["uri"] == BETA_APP  # reached beta, URIs public
        assert embedded["resource"]["uri"] == BETA_APP
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("open_beta_app", {})  # the catalog's name is not this route's
        assert "Unknown tool" in unknown.value.error.message
        big = await session.call_tool("beta__big_text", {"chars": 50_000})  # no limit of its own: the route's
        assert len(big.content[0].text) == 1000  # type: ignore[union-attr]  # not the gateway's 20,000
