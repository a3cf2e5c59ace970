#!/usr/bin/env python3
"""An "everything" server built on the official Python SDK (`mcp` 2.3): what both conformance suites
(0.1.16 for the handshake era, 0.2.0-alpha.12 for 2026-07-28) check of a server, from one process type.

It stands in for the python-sdk's examples/servers/everything-server (not on PyPI): the SDK serves both
eras on one stdio connection, the client's first request deciding which. So behind the gateway it is a
backend that accepts both eras. The tools here ask the client during the call, the handshake-era way
(ctx.session.create_message, ctx.elicit): sampling, elicitation, SEP-1034 defaults, SEP-1330 enums.
sdk_everything_rounds.py adds the 2026-07-28 tools that answer `input_required` instead (SEP-2322).

Run it over stdio (the default, as a gateway backend), or `--http PORT` to serve Streamable HTTP on
127.0.0.1 for a direct run of the suites (the baseline a gateway must match).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
from mcp.server.mcpserver import Context, MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sdk_everything_forms as forms
import sdk_everything_rounds as rounds

# shared with the hand-written fixture: media, the pause between notifications, the JSON Schema keywords
from conformance_fixture import JSON_SCHEMA_2020_12, RED_PIXEL_PNG, SILENT_WAV, STEP_S

RECONNECT_PAUSE_S: Final = 0.2  # the SSE polling scenario reconnects within this
COMPLETIONS: Final = ("paris", "park", "party")
MAX_SUBSCRIPTIONS: Final = 64  # a client subscribing to everything cannot grow this process without end


def no_op() -> str:
    return "ok"


# The SDK derives a tool's inputSchema from its signature; this one is given whole instead.
SCHEMA_TOOL: Final = Tool.from_function(
    no_op, name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features"
).model_copy(update={"parameters": JSON_SCHEMA_2020_12})

server: MCPServer[Any] = MCPServer(name="sdk-everything", version="2.3.0", tools=[SCHEMA_TOOL])
subscribed: set[str] = set()


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def image() -> ImageContent:
    return ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png")


def embedded(uri: str, body: str, mime_type: str = "text/plain") -> EmbeddedResource:
    contents = TextResourceContents(uri=uri, mime_type=mime_type, text=body)
    return EmbeddedResource(type="resource", resource=contents)


# --- tools that answer at once ------------------------------------------------------------------------------


@server.tool(description="Returns one text item")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Returns an image")
def test_image_content() -> list[ImageContent]:
    return [image()]


@server.tool(description="Returns audio")
def test_audio_content() -> list[AudioContent]:
    return [AudioContent(type="audio", data=SILENT_WAV, mime_type="audio/wav")]


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> list[EmbeddedResource]:
    return [embedded("test://embedded-resource", "This is an embedded resource content.")]


@server.tool(description="Returns text, an image and a resource")
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    data = embedded("test://mixed-content-resource", '{"test":"data","value":123}', "application/json")
    return [text("Multiple content types test:"), image(), data]


@server.tool(description="Always fails: the SDK turns its ToolError into an isError result")
def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool(description="Echoes its region, which a 2026-07-28 client mirrors as Mcp-Param-Region")
def test_x_mcp_header(
    region: Annotated[str, Field(description="The region", json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    return f"Region: {region}"


# --- tools that notify while they run -----------------------------------------------------------------------


@server.tool(description="Logs three lines while it runs")
async def test_tool_with_logging(ctx: Context) -> str:
    for index, line in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if index:
            await anyio.sleep(STEP_S)
        await ctx.info(line)
    return "Tool with logging executed successfully"


@server.tool(description="Logs one line, then answers (SEP-2575: no log unless the request asked)")
async def test_logging_tool(ctx: Context) -> str:
    await ctx.info("one line")
    return "Logged one line"


@server.tool(description="Reports progress 0, 50, 100 of 100")
async def test_tool_with_progress(ctx: Context) -> str:
    for index, done in enumerate((0, 50, 100)):
        if index:
            await anyio.sleep(STEP_S)
        await ctx.report_progress(done, 100, f"step {done} of 100")
    return "Tool with progress executed successfully"


@server.tool(description="Logs, closes its SSE stream (on HTTP), waits, and answers (SEP-1699)")
async def test_reconnection(ctx: Context) -> str:
    await ctx.info("Before the stream closes")
    await ctx.close_sse_stream()  # a no-op on stdio: the gateway keeps the client's stream
    await anyio.sleep(RECONNECT_PAUSE_S)
    await ctx.info("After the client came back")
    return "Reconnection test completed successfully"


# --- tools that ask the client during the call (the handshake era) ------------------------------------------


@server.tool(description="Asks the client's LLM (sampling/createMessage during the call)")
async def test_sampling(prompt: str, ctx: Context) -> str:
    message = SamplingMessage(role="user", content=text(prompt))
    # related_request_id: on HTTP the ask goes out on this call's stream, not the standalone GET stream
    answer = await ctx.session.create_message(
        messages=[message], max_tokens=100, related_request_id=ctx.request_id
    )
    reply = answer.content.text if answer.content.type == "text" else f"({answer.content.type})"
    return f"LLM response: {reply}"


class UserAnswer(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@server.tool(description="Asks the user (elicitation/create during the call)")
async def test_elicitation(message: str, ctx: Context) -> str:
    return forms.outcome("User response", await ctx.elicit(message=message, schema=UserAnswer))


@server.tool(description="Asks with a default for every primitive type (SEP-1034)")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    answer = await ctx.elicit(message="Please review the fields and their defaults", schema=forms.Defaults)
    return forms.outcome("Elicitation completed", answer)


@server.tool(description="Asks with every enum form: untitled, titled, legacy, multi-select (SEP-1330)")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    answer = await ctx.elicit(message="Please choose from the enum fields", schema=forms.Enums)
    return forms.outcome("Elicitation completed", answer)


@server.tool(description="Needs the client's sampling capability: -32021 when it was not declared")
async def test_missing_capability(ctx: Context) -> str:
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="test_missing_capability needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared sampling"


# --- list changes (SEP-2575: announced on subscriptions/listen, or as legacy notifications) -----------------


@server.tool(description="Adds and removes test_dynamic_tool, then announces the change")
async def test_trigger_tool_change(ctx: Context) -> str:
    server.add_tool(no_op, name="test_dynamic_tool", description="Listed for a moment")
    server.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "The tool list changed"


@server.tool(description="Adds and removes test_dynamic_prompt, then announces the change")
async def test_trigger_prompt_change(ctx: Context) -> str:
    server.add_prompt(forms.dynamic_prompt())
    server.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "The prompt list changed"


# --- resources ----------------------------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(RED_PIXEL_PNG)


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content."


async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    if len(subscribed) >= MAX_SUBSCRIPTIONS and str(params.uri) not in subscribed:
        raise MCPError(code=-32602, message=f"at most {MAX_SUBSCRIPTIONS} subscriptions")
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


# No public registration for these three in 2.3: the low-level server takes them.
server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


# --- prompts and completion ---------------------------------------------------------------------------------


@server.prompt(description="A prompt without arguments")
def test_simple_prompt() -> list[UserMessage]:
    return [UserMessage(text("This is a simple prompt for testing."))]


@server.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    return [UserMessage(text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@server.prompt(description="A prompt that embeds a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    resource = embedded(resourceUri, "Embedded resource content for testing.")
    return [UserMessage(resource), UserMessage(text("Please process the embedded resource above."))]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[UserMessage]:
    return [UserMessage(image()), UserMessage(text("Please analyze the image above."))]


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    values = [word for word in COMPLETIONS if word.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


rounds.register(server)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    options = parser.parse_args()
    warnings.simplefilter("ignore")  # the handshake-era calls above are deprecated at 2026-07-28, on purpose
    if options.http is None:
        anyio.run(server.run_stdio_async)
    else:
        server.run("streamable-http", port=options.http, event_store=forms.EventLog(), retry_interval=100)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
