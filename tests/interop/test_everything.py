"""The reference server `@modelcontextprotocol/server-everything` (from npm, on Node 22) behind the gateway,
driven by official Python SDK clients over real WebSockets: every feature the gateway forwards, as a
server that exercises all of MCP offers it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp import Client
from sdk_websocket import websocket_client
from support import DEADLINE_S, SERVER_EVERYTHING, Notifications, running, with_websocket, write_config

STATIC_DOC = "demo://resource/static/document/architecture.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


def everything(name: str, node: Path) -> dict[str, Any]:
    return {"name": name, "command": str(node), "args": [str(SERVER_EVERYTHING), "stdio"]}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def sampler(name: str, entered: trio.Event, other: trio.Event | None = None) -> Any:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        entered.set()
        if other is not None:
            await other.wait()  # both clients' requests are open at once
        reply = types.TextContent(type="text", text=f"sampled by {name}")
        return types.CreateMessageResult(role="assistant", content=reply, model=f"model-{name}")

    return sample


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})


async def list_roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///workspace/project", name="project")])  # type: ignore[arg-type]


async def all_pages(client: Client) -> list[str]:
    names, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names += [tool.name for tool in page.tools]
        if not (cursor := page.next_cursor):
            return names


async def test_server_everything_through_the_gateway(tmp_path: Path, node: Path) -> None:
    backend = {**everything("everything", node), "roots": "client"}  # this client's roots: it is alone
    config = with_websocket(write_config(tmp_path / "g.toml", [backend], page_size=5))
    notifications = Notifications()
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(
            gateway.websocket_url,
            sampling_callback=sampler("A", trio.Event()),
            elicitation_callback=elicit,
            list_roots_callback=list_roots,
            logging_callback=on_log,
            message_handler=notifications.handle,
        ) as client:
            capabilities = client.server_capabilities
            assert capabilities.prompts and capabilities.completions and capabilities.logging
            assert capabilities.resources and capabilities.resources.subscribe

            # Tools, paginated by the gateway (page_size 5), including the ones server-everything registers
            # only for clients that can take sampling, elicitation and roots.
            names = await all_pages(client)
            assert len(names) == len(set(names)) >= 15
            assert {
                "get-sum",
                "trigger-sampling-request",
                "trigger-elicitation-request",
                "get-roots-list",
            } <= set(names)
            assert "The sum of 2 and 3 is 5" in text_of(await client.call_tool("get-sum", {"a": 2, "b": 3}))

            # Requests from the server to this client, answered by its callbacks.
            sampled = text_of(await client.call_tool("trigger-sampling-request", {"prompt": "hello"}))
            assert "sampled by A" in sampled and "model-A" in sampled
            elicited = text_of(await client.call_tool("trigger-elicitation-request", {}))
            assert "Ada Lovelace" in elicited
            url_done = await client.call_tool("trigger-url-elicitation", {"url": "https://example.com/login"})
            assert "completed the URL elicitation" in text_of(url_done)
            assert "file:///workspace/project" in text_of(await client.call_tool("get-roots-list", {}))

            # Prompts and completion.
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert {"simple-prompt", "args-prompt", "completable-prompt"} <= prompts
            prompt = await client.get_prompt("args-prompt", {"city": "Paris", "state": "Texas"})
            assert "Paris, Texas" in str(prompt.messages[0].content)
            ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
            done = await client.complete(ref, {"name": "department", "value": "Eng"})
            assert done.completion.values == ["Engineering"]
            done = await client.complete(
                ref, {"name": "name", "value": ""}, context_arguments={"department": "Sales"}
            )
            assert done.completion.values == ["David", "Eve", "Frank"]

            # Resources: listed, templates, read by URI and by template, completion of a template argument.
            resources = {str(r.uri) for r in (await client.list_resources(cache_mode="bypass")).resources}
            assert STATIC_DOC in resources
            templates = (await client.list_resource_templates(cache_mode="bypass")).resource_templates
            assert TEXT_TEMPLATE in {t.uri_template for t in templates}
            read = await client.read_resource(STATIC_DOC)
            assert str(read.contents[0].uri) == STATIC_DOC and read.contents[0].text  # type: ignore[union-attr]
            dynamic = await client.read_resource("demo://resource/dynamic/text/7")
            assert "7" in dynamic.contents[0].text  # type: ignore[union-attr]
            template_ref = types.ResourceTemplateReference(type="ref/resource", uri=TEXT_TEMPLATE)
            done = await client.complete(template_ref, {"name": "resourceId", "value": "1"})
            assert done.completion.values and all(v.startswith("1") for v in done.completion.values)

            # Subscriptions and logging: the server logs the subscription (the gateway names it), and its
            # simulated updates reach this subscribed client.
            await client.subscribe_resource(STATIC_DOC)
            await client.call_tool("toggle-subscriber-updates", {})
            await notifications.wait_for("notifications/resources/updated", 1)
            with trio.fail_after(DEADLINE_S):
                while not any("Subscribe" in str(log.data) for log in logs):
                    await notifications.wait_for("notifications/message", len(notifications.seen) + 1)
            assert {log.logger for log in logs} == {"everything"}


async def test_two_clients_at_once_each_answer_their_own_requests(tmp_path: Path, node: Path) -> None:
    backends = [everything("one", node), everything("two", node)]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    a_in, b_in = trio.Event(), trio.Event()
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            websocket_client(url, sampling_callback=sampler("A", a_in, b_in)) as a,
            websocket_client(url, sampling_callback=sampler("B", b_in, a_in)) as b,
        ):
            results: dict[str, str] = {}

            async def call(name: str, client: Client, tool: str) -> None:
                results[name] = text_of(await client.call_tool(tool, {"prompt": f"for {name}"}))

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call, "A", a, "trigger-sampling-request")
                    nursery.start_soon(call, "B", b, "two__trigger-sampling-request")
            assert "sampled by A" in results["A"] and "sampled by B" not in results["A"]
            assert "sampled by B" in results["B"] and "sampled by A" not in results["B"]
            # The same backend, one client after the other: each request reaches the client that called.
            assert "sampled by B" in text_of(await b.call_tool("trigger-sampling-request", {"prompt": "x"}))
            assert "sampled by A" in text_of(await a.call_tool("trigger-sampling-request", {"prompt": "y"}))
