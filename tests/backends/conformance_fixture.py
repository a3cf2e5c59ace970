#!/usr/bin/env python3
"""The fixture the official conformance suite (`@modelcontextprotocol/conformance`, server mode) expects
behind the URL it tests: its tools, prompts, resources, completion and logging, as a stdio MCP server.

The suite speaks Streamable HTTP to the gateway; the gateway forwards to this backend over stdio. So every
scenario that passes through the gateway proves the gateway's HTTP frontend and its forwarding, not this
file. What each tool must return is written in the suite's scenario descriptions (`conformance list` and
the scenario texts); this is our own implementation of them. conformance_fixture_2026.py adds what the
2026-07-28 suite (0.2.0-alpha.12) calls, in the form a legacy server gives it; the 0.1.16 run lists those
tools and never calls them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo: mcp_gateway_examples
import conformance_fixture_2026 as suite_2026
from conformance_fixture_2026 import result_of

from mcp_gateway_examples.toolserver import (
    INVALID_PARAMS,
    Context,
    JsonObject,
    ToolError,
    ToolServer,
    object_schema,
    setup_logging,
    text_result,
)

# A 1x1 red PNG and a tiny silent WAV: the smallest valid media the scenarios ask for.
RED_PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
SILENT_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQIAAACAgA=="
STEP_S = 0.05  # the pause the logging and progress scenarios ask for between notifications

EMPTY = object_schema({})
STRING = {"type": "string"}


def image(data: str = RED_PIXEL_PNG) -> JsonObject:
    return {"type": "image", "data": data, "mimeType": "image/png"}


def embedded(uri: str, text: str, mime_type: str = "text/plain") -> JsonObject:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}}


def content(*items: JsonObject, is_error: bool = False) -> JsonObject:
    result: JsonObject = {"content": list(items)}
    if is_error:
        result["isError"] = True
    return result


# --- tools -------------------------------------------------------------------------------------------------


async def simple_text(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result("This is a simple text response for testing.")


async def image_content(ctx: Context, arguments: JsonObject) -> JsonObject:
    return content(image())


async def audio_content(ctx: Context, arguments: JsonObject) -> JsonObject:
    return content({"type": "audio", "data": SILENT_WAV, "mimeType": "audio/wav"})


async def embedded_resource(ctx: Context, arguments: JsonObject) -> JsonObject:
    return content(embedded("test://embedded-resource", "This is an embedded resource content."))


async def mixed_content(ctx: Context, arguments: JsonObject) -> JsonObject:
    return content(
        {"type": "text", "text": "Multiple content types test:"},
        image(),
        embedded("test://mixed-content-resource", '{"test":"data","value":123}', "application/json"),
    )


async def with_logging(ctx: Context, arguments: JsonObject) -> JsonObject:
    lines = ("Tool execution started", "Tool processing data", "Tool execution completed")
    for index, line in enumerate(lines):
        if index:
            await trio.sleep(STEP_S)
        await ctx.notify("notifications/message", {"level": "info", "logger": "conformance", "data": line})
    return text_result("Tool with logging executed successfully")


async def error_handling(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result("This tool intentionally returns an error for testing", is_error=True)


async def with_progress(ctx: Context, arguments: JsonObject) -> JsonObject:
    for index, done in enumerate((0, 50, 100)):
        if index:
            await trio.sleep(STEP_S)
        await ctx.progress(done, 100)
    return text_result("Tool with progress executed successfully")


async def sampling(ctx: Context, arguments: JsonObject) -> JsonObject:
    message = {"role": "user", "content": {"type": "text", "text": arguments["prompt"]}}
    answer = await ctx.request_client("sampling/createMessage", {"messages": [message], "maxTokens": 100})
    reply = result_of(answer).get("content", {})
    return text_result(f"LLM response: {reply.get('text', '') if isinstance(reply, dict) else reply}")


async def elicit(ctx: Context, message: str, properties: JsonObject, required: list[str]) -> JsonObject:
    schema = {"type": "object", "properties": properties, "required": required}
    answer = await ctx.request_client("elicitation/create", {"message": message, "requestedSchema": schema})
    return result_of(answer)


def completed(result: JsonObject) -> JsonObject:
    return text_result(
        f"Elicitation completed: action={result.get('action')}, content={result.get('content')}"
    )


async def elicitation(ctx: Context, arguments: JsonObject) -> JsonObject:
    properties = {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    }
    result = await elicit(ctx, arguments["message"], properties, ["username", "email"])
    return text_result(f"User response: action={result.get('action')}, content={result.get('content')}")


async def elicitation_defaults(ctx: Context, arguments: JsonObject) -> JsonObject:
    properties = {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    }
    return completed(
        await elicit(ctx, "Please review and update the form fields with defaults", properties, [])
    )


def titled(prefix: str, *titles: str) -> list[JsonObject]:
    return [{"const": f"{prefix}{n}", "title": title} for n, title in enumerate(titles, 1)]


async def elicitation_enums(ctx: Context, arguments: JsonObject) -> JsonObject:
    options = ["option1", "option2", "option3"]
    properties = {
        "untitledSingle": {"type": "string", "description": "Pick one", "enum": options},
        "titledSingle": {
            "type": "string",
            "description": "Pick one",
            "oneOf": titled("value", "First Option", "Second Option", "Third Option"),
        },
        "legacyEnum": {
            "type": "string",
            "description": "Pick one (legacy enumNames)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Pick any",
            "items": {"type": "string", "enum": options},
        },
        "titledMulti": {
            "type": "array",
            "description": "Pick any",
            "items": {"anyOf": titled("value", "First Choice", "Second Choice", "Third Choice")},
        },
    }
    return completed(await elicit(ctx, "Please choose from the enum fields", properties, []))


async def reconnection(ctx: Context, arguments: JsonObject) -> JsonObject:
    # The suite's own fixture closes its HTTP stream here; a stdio backend has none. A log line before the
    # answer makes the gateway answer on an SSE stream, so the suite checks its priming event and retry.
    await ctx.notify("notifications/message", {"level": "info", "data": "answering after a pause"})
    await trio.sleep(STEP_S)
    return text_result("Reconnection test completed successfully")


async def no_op(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result("ok")


# The keywords both suites check are kept as listed (0.1.16: $schema, $defs, additionalProperties; 0.2 adds
# $anchor, allOf/anyOf and if/then/else); the fixture's argument check ignores the ones it does not know.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": STRING, "city": STRING},
        },
    },
    "properties": {
        "name": STRING,
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": STRING,
        "email": STRING,
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

TOOLS = {
    "test_simple_text": (simple_text, "Returns simple text", EMPTY),
    "test_image_content": (image_content, "Returns an image", EMPTY),
    "test_audio_content": (audio_content, "Returns audio", EMPTY),
    "test_embedded_resource": (embedded_resource, "Returns an embedded resource", EMPTY),
    "test_multiple_content_types": (mixed_content, "Returns text, an image and a resource", EMPTY),
    "test_tool_with_logging": (with_logging, "Logs three lines while it runs", EMPTY),
    "test_error_handling": (error_handling, "Always returns an error result", EMPTY),
    "test_tool_with_progress": (with_progress, "Reports progress 0, 50, 100 of 100", EMPTY),
    "test_sampling": (sampling, "Asks the client's LLM", object_schema({"prompt": STRING}, "prompt")),
    "test_elicitation": (elicitation, "Asks the user", object_schema({"message": STRING}, "message")),
    "test_elicitation_sep1034_defaults": (elicitation_defaults, "Asks with defaults (SEP-1034)", EMPTY),
    "test_elicitation_sep1330_enums": (elicitation_enums, "Asks with every enum form (SEP-1330)", EMPTY),
    "test_reconnection": (reconnection, "Answers after a pause (SSE polling scenario)", EMPTY),
    "json_schema_2020_12_tool": (no_op, "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12),
    **suite_2026.TOOLS,  # after these: header validation calls the first tool listed with {}
}


# --- prompts -----------------------------------------------------------------------------------------------

PROMPTS = [
    {"name": "test_simple_prompt", "description": "A prompt without arguments"},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt that embeds a resource",
        "arguments": [
            {"name": "resourceUri", "description": "URI of the resource to embed", "required": True}
        ],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image"},
]


def user(item: JsonObject) -> JsonObject:
    return {"role": "user", "content": item}


def text(value: str) -> JsonObject:
    return {"type": "text", "text": value}


async def get_prompt(ctx: Context, params: JsonObject) -> JsonObject:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "test_simple_prompt":
        return {"messages": [user(text("This is a simple prompt for testing."))]}
    if name == "test_prompt_with_arguments":
        line = f"Prompt with arguments: arg1='{arguments.get('arg1')}', arg2='{arguments.get('arg2')}'"
        return {"messages": [user(text(line))]}
    if name == "test_prompt_with_embedded_resource":
        uri = str(arguments.get("resourceUri", "test://example-resource"))
        resource = embedded(uri, "Embedded resource content for testing.")
        return {"messages": [user(resource), user(text("Please process the embedded resource above."))]}
    if name == "test_prompt_with_image":
        return {"messages": [user(image()), user(text("Please analyze the image above."))]}
    answer = await suite_2026.get_prompt(ctx, name)
    if answer is not None:
        return answer
    raise ToolError(INVALID_PARAMS, f"Unknown prompt: {name}")


async def list_prompts(ctx: Context, params: JsonObject) -> JsonObject:
    return {"prompts": PROMPTS + suite_2026.listed_prompts()}


async def complete(ctx: Context, params: JsonObject) -> JsonObject:
    prefix = str((params.get("argument") or {}).get("value", ""))
    values = [word for word in ("paris", "park", "party") if word.startswith(prefix)]
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}


# --- resources ---------------------------------------------------------------------------------------------

RESOURCES = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "description": "A static text resource",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "description": "A static binary resource (PNG)",
        "mimeType": "image/png",
    },
    {
        "uri": "test://watched-resource",
        "name": "watched-resource",
        "description": "A resource to subscribe to",
        "mimeType": "text/plain",
    },
]
TEMPLATE = {
    "uriTemplate": "test://template/{id}/data",
    "name": "template-data",
    "description": "Data for an id",
    "mimeType": "application/json",
}
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"


async def read_resource(ctx: Context, params: JsonObject) -> JsonObject:
    uri = str(params.get("uri", ""))
    if uri == "test://static-text":
        body = {"mimeType": "text/plain", "text": "This is the content of the static text resource."}
    elif uri == "test://static-binary":
        body = {"mimeType": "image/png", "blob": RED_PIXEL_PNG}
    elif uri == "test://watched-resource":
        body = {"mimeType": "text/plain", "text": "Watched resource content."}
    elif uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        item = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
        data = f'{{"id":"{item}","templateTest":true,"data":"Data for ID: {item}"}}'
        body = {"mimeType": "application/json", "text": data}
    else:
        raise ToolError(-32002, f"Resource not found: {uri}")
    return {"contents": [{"uri": uri, **body}]}


async def list_resources(ctx: Context, params: JsonObject) -> JsonObject:
    return {"resources": RESOURCES}


async def list_templates(ctx: Context, params: JsonObject) -> JsonObject:
    return {"resourceTemplates": [TEMPLATE]}


async def empty(ctx: Context, params: JsonObject) -> JsonObject:
    return {}


def build() -> ToolServer:
    server = ToolServer("conformance-fixture", "1.0.0")
    for name, (handler, description, schema) in TOOLS.items():
        server.add_tool(name, handler, description=description, input_schema=schema)
    for method, handler in (
        ("prompts/list", list_prompts),
        ("prompts/get", get_prompt),
        ("completion/complete", complete),
        ("resources/list", list_resources),
        ("resources/templates/list", list_templates),
        ("resources/read", read_resource),
        ("resources/subscribe", empty),
        ("resources/unsubscribe", empty),
        ("logging/setLevel", empty),
    ):
        server.set_method(method, handler)
    server.extra_capabilities.update(
        prompts={"listChanged": True},  # test_trigger_prompt_change changes them
        resources={"listChanged": False, "subscribe": True},
        completions={},
        logging={},
    )
    return server


if __name__ == "__main__":
    setup_logging()
    raise SystemExit(build().run())
