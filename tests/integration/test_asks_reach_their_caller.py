"""A backend's request for a client reaches the client whose call caused it (issues #24, #25): official SDK
clients with real sampling callbacks, several at once on one backend, which is itself built on the official
Python SDK (tests/backends/sdk_sampling_server.py): what ties its requests to calls is what that SDK puts
on the wire."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

import mcp_types as types
import trio
from mcp import Client
from sdk_websocket import websocket_client
from support import DEADLINE_S, ROOT, running, sampler, with_http, with_websocket, write_config

MODERN: Final = "2026-07-28"
SDK_SERVER: Final = ROOT / "tests" / "backends" / "sdk_sampling_server.py"


def sdk_backend(name: str = "sdk") -> dict[str, Any]:
    """The SDK server, reached in the handshake era (it speaks both): the era whose servers ask clients."""
    return {"name": name, "command": sys.executable, "args": [str(SDK_SERVER)], "era": "legacy"}


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def test_two_clients_sampling_at_once_on_one_backend_each_answer_their_own(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [sdk_backend()]))
    a_prompts: list[str] = []
    b_prompts: list[str] = []
    a_asked, b_answered = trio.Event(), trio.Event()
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            # A's question stays open until B's has been answered: both calls are in flight at once.
            websocket_client(url, sampling_callback=sampler("A", a_asked, b_answered, a_prompts)) as a,
            websocket_client(url, sampling_callback=sampler("B", b_answered, prompts=b_prompts)) as b,
        ):
            answers: dict[str, str] = {}

            async def a_calls() -> None:
                answers["A"] = text_of(await a.call_tool("sample", {"text": "from A"}))

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(a_calls)
                    await a_asked.wait()
                    answers["B"] = text_of(await b.call_tool("sample", {"text": "from B"}))
    assert answers == {"A": "A answers from A", "B": "B answers from B"}
    assert (a_prompts, b_prompts) == (["from A"], ["from B"])


async def test_a_modern_clients_second_ask_never_reaches_another_client(tmp_path: Path) -> None:
    """#25: modern client A's call asks twice (between the asks A's call is parked on the gateway while A
    answers the first round); legacy client B has a call on the same backend in flight all along. Both of
    A's questions reach A; B is shown only its own, and its call gets its own answer."""
    config = with_http(with_websocket(write_config(tmp_path / "g.toml", [sdk_backend()])))
    a_prompts: list[str] = []
    b_prompts: list[str] = []
    b_asked, a_done = trio.Event(), trio.Event()
    async with running(config) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        async with (
            websocket_client(
                gateway.websocket_url, sampling_callback=sampler("B", b_asked, a_done, b_prompts)
            ) as b,
            Client(gateway.http_url, mode=MODERN, sampling_callback=sampler("A", prompts=a_prompts)) as a,
        ):
            answers: dict[str, str] = {}

            async def b_calls() -> None:
                answers["B"] = text_of(await b.call_tool("sample", {"text": "from B"}))

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(b_calls)
                    await b_asked.wait()  # B's call is in flight, its question open
                    answers["A"] = text_of(await a.call_tool("sample_twice", {"text": "from A"}))
                    a_done.set()
    assert answers == {"A": "A answers from A | A answers again: A answers from A", "B": "B answers from B"}
    assert a_prompts == ["from A", "again: A answers from A"]
    assert b_prompts == ["from B"]
