"""The conformance fixture's tools for the 2026-07-28 suite (tests/backends/conformance_fixture_2026.py),
driven directly by the SDK client on the legacy era, the way the gateway reaches the fixture: each tool asks
the client with real requests under the ids the suite expects as inputRequests keys, and the triggers
change the lists and say so. No gateway here: the 2026 suite runs through it once the gateway speaks
that era."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import mcp_types as types
import trio
from mcp import Client, StdioServerParameters
from mcp.client import ClientRequestContext
from support import DEADLINE_S, LEGACY_ERA, ROOT, Notifications

FIXTURE: Final = ROOT / "tests" / "backends" / "conformance_fixture.py"
ELICIT: Final = "elicitation/create"
ELICITED: Final = {"name": "Alice", "ok": True, "color": "green", "context": "tests"}


@asynccontextmanager
async def fixture_client(
    asked: list[tuple[Any, str]], notifications: Notifications, elicitations_held: int = 0
) -> AsyncIterator[Client]:
    """An SDK client of the fixture over stdio that answers every ask and records (request id, method).
    With `elicitations_held`, no elicitation is answered before that many have arrived."""
    all_held = trio.Event()

    async def sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        asked.append((context.request_id, "sampling/createMessage"))
        text = types.TextContent(type="text", text="Paris")
        return types.CreateMessageResult(
            role="assistant", content=text, model="test-model", stop_reason="endTurn"
        )

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append((context.request_id, "elicitation/create"))
        if len(asked) >= elicitations_held:
            all_held.set()
        await all_held.wait()
        wanted = params.requested_schema["properties"]  # type: ignore[union-attr]
        return types.ElicitResult(action="accept", content={key: ELICITED[key] for key in wanted})

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        asked.append((context.request_id, "roots/list"))
        return types.ListRootsResult(roots=[types.Root(uri="file:///test/root", name="Test Root")])

    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
    client = Client(
        params,
        mode=LEGACY_ERA,
        sampling_callback=sample,
        elicitation_callback=elicit,
        list_roots_callback=roots,
        message_handler=notifications.handle,
    )
    with trio.fail_after(DEADLINE_S):
        async with client:
            yield client


async def text_of(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[union-attr]


async def test_input_required_tools_ask_under_the_suites_keys() -> None:
    asked: list[tuple[Any, str]] = []
    async with fixture_client(asked, Notifications()) as client:
        cases = [
            ("elicitation", "Hello, Alice!", [("user_name", ELICIT)]),
            ("sampling", "The model answered: Paris", [("capital_question", "sampling/createMessage")]),
            ("list_roots", "Roots: file:///test/root (Test Root)", [("client_roots", "roots/list")]),
            ("request_state", "state-ok: ok=True", [("confirm", ELICIT)]),
            ("tampered_state", "Confirmed: ok=True", [("confirm", ELICIT)]),
            ("capabilities", "Sampled: Paris", [("sampling_only", "sampling/createMessage")]),
            ("multi_round", "Alice likes green", [("step1", ELICIT), ("step2", ELICIT)]),
        ]
        for name, text, asks in cases:
            asked.clear()
            assert await text_of(client, f"test_input_required_result_{name}") == text
            assert asked == asks, name

        asked.clear()
        text = await text_of(client, "test_input_required_result_multiple_inputs")
        assert text == "Paris Alice; roots: file:///test/root (Test Root)"
        assert sorted(asked) == [
            ("client_roots", "roots/list"),
            ("greeting", "sampling/createMessage"),
            ("user_name", "elicitation/create"),
        ]

        asked.clear()
        prompt = await client.get_prompt("test_input_required_result_prompt")
        assert prompt.messages[0].content.text == "Use this context: tests"  # type: ignore[union-attr]
        assert asked == [("user_context", "elicitation/create")]


async def test_diagnostic_tools_of_the_stateless_scenario() -> None:
    asked: list[tuple[Any, str]] = []
    notifications = Notifications()
    async with fixture_client(asked, notifications) as client:
        assert await text_of(client, "test_missing_capability") == "Sampled: Paris"
        assert await text_of(client, "test_streaming_elicitation") == "Elicitation answered: action=accept"
        assert [method for _, method in asked] == ["sampling/createMessage", "elicitation/create"]
        assert await text_of(client, "test_logging_tool") == "Logged one line"
        await notifications.wait_for("notifications/message", 1)
        assert await text_of(client, "test_custom_header_tool", {"region": "Hello"}) == "Region: Hello"

        tools = await client.list_tools(cache_mode="bypass")
        assert tools.tools[0].name == "test_simple_text"  # the header-validation cases call it with {}
        region = next(tool for tool in tools.tools if tool.name == "test_custom_header_tool")
        assert region.input_schema["properties"]["region"]["x-mcp-header"] == "Region"

        for count, listed in ((1, True), (2, False)):
            await text_of(client, "test_trigger_tool_change")
            await notifications.wait_for("notifications/tools/list_changed", count)
            names = [tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools]
            assert ("test_dynamic_tool" in names) is listed
            await text_of(client, "test_trigger_prompt_change")
            await notifications.wait_for("notifications/prompts/list_changed", count)
            prompts = [p.name for p in (await client.list_prompts(cache_mode="bypass")).prompts]
            assert ("test_dynamic_prompt" in prompts) is listed


async def test_a_newer_ask_under_a_pending_key_withdraws_the_older_one() -> None:
    """The suite checks the key of the newest ask; a call it never came back to must not take that key."""
    asked: list[tuple[Any, str]] = []
    outcomes: list[str] = []

    async def call(client: Client) -> None:
        try:
            result = await client.call_tool("test_input_required_result_elicitation", {})
        except Exception:  # the SDK raises a JSON-RPC error
            outcomes.append("withdrawn")
            return
        outcomes.append("withdrawn" if result.is_error else result.content[0].text)  # type: ignore[union-attr]

    async with (
        fixture_client(asked, Notifications(), elicitations_held=2) as client,
        trio.open_nursery() as nursery,
    ):
        for _ in range(2):
            nursery.start_soon(call, client)
    assert asked == [("user_name", ELICIT), ("user_name", ELICIT)]
    assert sorted(outcomes) == ["Hello, Alice!", "withdrawn"]
