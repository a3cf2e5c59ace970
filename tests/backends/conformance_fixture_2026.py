"""What conformance 0.2.0-alpha.12 (protocol 2026-07-28) calls on the fixture behind the gateway, in the form
a legacy (2025-11-25) server can give it; conformance_fixture.py registers all of it beside its own tools.

The 2026 suite expects `input_required` results (SEP-2322) from these tools. A legacy server has none: it asks
the client with a real sampling/createMessage, elicitation/create or roots/list request and waits for the
answer, and the gateway is the one to turn such asks into `input_required` for a modern client. Each ask goes
out under the id the suite expects as its inputRequests key (`user_name`, `capital_question`, ...), so a
gateway that keys a bridged ask by the backend's request id shows the suite the key it checks; an earlier
ask still pending under that id (a call whose client never came back) is withdrawn first.

Also here: the SEP-2575 diagnostic tools of the `server-stateless` scenario, a tool with a string
`x-mcp-header` property (`http-custom-header-server-validation`), and the prompt of the non-tool scenario.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo: mcp_gateway_examples
from mcp_gateway_examples.toolserver import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Context,
    JsonObject,
    ToolError,
    object_schema,
    text_result,
)

EMPTY = object_schema({})
STRING = {"type": "string"}
DYNAMIC_TOOL = "test_dynamic_tool"
DYNAMIC_PROMPT: JsonObject = {"name": "test_dynamic_prompt", "description": "Listed while toggled on"}
INPUT_REQUIRED_PROMPT: JsonObject = {
    "name": "test_input_required_result_prompt",
    "description": "Asks the user for context (an elicitation) before it returns its messages",
}

_asking: dict[str, tuple[trio.CancelScope, trio.Event]] = {}  # this server's requests to the client, by id
_prompt_listed = {DYNAMIC_PROMPT["name"]: False}


def result_of(answer: JsonObject) -> JsonObject:
    """The client's result, or its error raised as this call's error."""
    if "error" in answer:
        error = answer["error"]
        raise ToolError(error.get("code", INVALID_PARAMS), error.get("message", "the client refused"))
    return answer["result"]  # type: ignore[no-any-return]


async def ask(ctx: Context, key: str, method: str, params: JsonObject) -> JsonObject:
    """Ask the client under the id `key`; its result. An earlier ask still pending under that id (a call the
    client never came back to) is withdrawn first: the newer one is the one the suite checks."""
    while key in _asking:
        older, ended = _asking[key]
        older.cancel()  # its request_client tells the client with notifications/cancelled
        await ended.wait()
    scope, ended = trio.CancelScope(), trio.Event()
    _asking[key] = (scope, ended)
    try:
        with scope:
            return result_of(await ctx.request_client(method, params, request_id=key))
        raise ToolError(INTERNAL_ERROR, f"a newer call asked the client for {key!r}")
    finally:
        del _asking[key]
        ended.set()


def form(message: str, field: str, kind: str = "string") -> JsonObject:
    """elicitation/create params: one required field."""
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return {"message": message, "requestedSchema": schema}


def prompt(text: str, max_tokens: int) -> JsonObject:
    """sampling/createMessage params: one user message."""
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {"messages": [message], "maxTokens": max_tokens}


def field_of(answer: JsonObject, name: str) -> Any:
    """A field of an accepted elicitation; None when the user declined or cancelled."""
    content = answer.get("content") if answer.get("action") == "accept" else None
    return content.get(name) if isinstance(content, dict) else None


def sampled_text(answer: JsonObject) -> str:
    content = answer.get("content")
    return str(content.get("text", "")) if isinstance(content, dict) else ""


def roots_text(answer: JsonObject) -> str:
    roots = answer.get("roots") if isinstance(answer.get("roots"), list) else []
    return ", ".join(f"{root.get('uri')} ({root.get('name')})" for root in roots if isinstance(root, dict))


# --- the SEP-2575 diagnostics (server-stateless) ------------------------------------------------------------


async def missing_capability(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "sampling", "sampling/createMessage", prompt("Say hello", 20))
    return text_result(f"Sampled: {sampled_text(answer)}")


async def streaming_elicitation(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "confirmation", "elicitation/create", form("Continue?", "ok", "boolean"))
    return text_result(f"Elicitation answered: action={answer.get('action')}")


async def logging_tool(ctx: Context, arguments: JsonObject) -> JsonObject:
    await ctx.notify("notifications/message", {"level": "info", "logger": "conformance", "data": "one line"})
    return text_result("Logged one line")


async def trigger_tool_change(ctx: Context, arguments: JsonObject) -> JsonObject:
    if ctx.server.remove_tool(DYNAMIC_TOOL):
        done = "removed"
    else:
        ctx.server.add_tool(DYNAMIC_TOOL, no_op, description="Listed while toggled on", input_schema=EMPTY)
        done = "added"
    await ctx.server.tools_changed()
    return text_result(f"{DYNAMIC_TOOL} {done}")


async def trigger_prompt_change(ctx: Context, arguments: JsonObject) -> JsonObject:
    name = DYNAMIC_PROMPT["name"]
    _prompt_listed[name] = not _prompt_listed[name]
    await ctx.notify("notifications/prompts/list_changed")
    return text_result(f"{name} {'added' if _prompt_listed[name] else 'removed'}")


async def no_op(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result("ok")


# --- SEP-2322, input_required, as legacy asks -------------------------------------------------------------


async def elicitation(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "user_name", "elicitation/create", form("What is your name?", "name"))
    return text_result(f"Hello, {field_of(answer, 'name')}!")


async def sampling(ctx: Context, arguments: JsonObject) -> JsonObject:
    question = prompt("What is the capital of France?", 100)
    answer = await ask(ctx, "capital_question", "sampling/createMessage", question)
    return text_result(f"The model answered: {sampled_text(answer)}")


async def list_roots(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "client_roots", "roots/list", {})
    return text_result(f"Roots: {roots_text(answer)}")


async def request_state(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "confirm", "elicitation/create", form("Please confirm", "ok", "boolean"))
    return text_result(f"state-ok: ok={field_of(answer, 'ok')}")


async def multiple_inputs(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Three asks at once, so a gateway gathering them puts all three in one input_required result."""
    answers: dict[str, JsonObject] = {}

    async def one(key: str, method: str, params: JsonObject) -> None:
        answers[key] = await ask(ctx, key, method, params)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, "user_name", "elicitation/create", form("What is your name?", "name"))
        nursery.start_soon(one, "greeting", "sampling/createMessage", prompt("Generate a greeting", 50))
        nursery.start_soon(one, "client_roots", "roots/list", {})
    name, greeting = field_of(answers["user_name"], "name"), sampled_text(answers["greeting"])
    return text_result(f"{greeting} {name}; roots: {roots_text(answers['client_roots'])}")


async def multi_round(ctx: Context, arguments: JsonObject) -> JsonObject:
    first = await ask(ctx, "step1", "elicitation/create", form("Step 1: What is your name?", "name"))
    color = form("Step 2: What is your favorite color?", "color")
    second = await ask(ctx, "step2", "elicitation/create", color)
    return text_result(f"{field_of(first, 'name')} likes {field_of(second, 'color')}")


async def tampered_state(ctx: Context, arguments: JsonObject) -> JsonObject:
    answer = await ask(ctx, "confirm", "elicitation/create", form("Please confirm", "ok", "boolean"))
    return text_result(f"Confirmed: ok={field_of(answer, 'ok')}")


async def capabilities(ctx: Context, arguments: JsonObject) -> JsonObject:
    """Asks for sampling only: the suite calls it declaring sampling and nothing else."""
    answer = await ask(ctx, "sampling_only", "sampling/createMessage", prompt("Say hello", 20))
    return text_result(f"Sampled: {sampled_text(answer)}")


async def custom_header(ctx: Context, arguments: JsonObject) -> JsonObject:
    return text_result(f"Region: {arguments.get('region')}")


REGION = {"type": "string", "description": "Mirrored as header Mcp-Param-Region", "x-mcp-header": "Region"}

REGION_SCHEMA = object_schema({"region": REGION}, "region")

TOOLS = {
    "test_missing_capability": (missing_capability, "Asks the client to sample (SEP-2575)", EMPTY),
    "test_streaming_elicitation": (streaming_elicitation, "Asks the user a question (SEP-2575)", EMPTY),
    "test_logging_tool": (logging_tool, "Logs one line, then answers (SEP-2575)", EMPTY),
    "test_trigger_tool_change": (trigger_tool_change, f"Adds or removes {DYNAMIC_TOOL}", EMPTY),
    "test_trigger_prompt_change": (trigger_prompt_change, "Adds or removes test_dynamic_prompt", EMPTY),
    "test_input_required_result_elicitation": (elicitation, "Asks the user's name", EMPTY),
    "test_input_required_result_sampling": (sampling, "Asks the client's LLM a question", EMPTY),
    "test_input_required_result_list_roots": (list_roots, "Asks the client for its roots", EMPTY),
    "test_input_required_result_request_state": (request_state, "Asks for a confirmation", EMPTY),
    "test_input_required_result_multiple_inputs": (multiple_inputs, "Asks three things at once", EMPTY),
    "test_input_required_result_multi_round": (multi_round, "Asks twice, one after the other", EMPTY),
    "test_input_required_result_tampered_state": (tampered_state, "Asks for a confirmation", EMPTY),
    "test_input_required_result_capabilities": (capabilities, "Asks only for sampling", EMPTY),
    "test_custom_header_tool": (custom_header, "Echoes its region", REGION_SCHEMA),
}


# --- prompts ---------------------------------------------------------------------------------------------


def listed_prompts() -> list[JsonObject]:
    """The prompts of this module, as prompts/list shows them now."""
    if _prompt_listed[DYNAMIC_PROMPT["name"]]:
        return [INPUT_REQUIRED_PROMPT, DYNAMIC_PROMPT]
    return [INPUT_REQUIRED_PROMPT]


async def get_prompt(ctx: Context, name: object) -> JsonObject | None:
    """prompts/get for a prompt of this module; None for any other name."""
    if name == INPUT_REQUIRED_PROMPT["name"]:
        message = form("What context should the prompt use?", "context")
        answer = await ask(ctx, "user_context", "elicitation/create", message)
        text = f"Use this context: {field_of(answer, 'context')}"
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
    if name == DYNAMIC_PROMPT["name"] and _prompt_listed[name]:
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "A dynamic prompt."}}]}
    return None
