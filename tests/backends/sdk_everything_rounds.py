"""sdk_everything.py's 2026-07-28 tools and prompt: each answers `input_required` (SEP-2322) naming what it
needs, and finishes when the client retries the call with the answers (`input_responses`) and the echoed
`request_state`. The SDK seals request_state (RequestStateSecurity, an ephemeral key per process by
default), so a tampered echo is refused before a handler sees it.

The keys of `input_requests` are the ones the 2026 suite looks for (`user_name`, `capital_question`, ...).
These tools are for 2026-07-28 clients: a handshake-era client never calls them (0.1.16 only lists them),
and the handshake-era way to ask is in sdk_everything.py."""

from __future__ import annotations

import json
from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer, UserMessage
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

__all__ = ["register"]

MAX_ROUND: Final = 2  # multi_round asks twice; a state claiming a later round starts over


def form(message: str, field: str, kind: str = "string") -> ElicitRequest:
    """An elicitation with one required field."""
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(question: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=question))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def answer_of(ctx: Context, key: str) -> InputResponse | None:
    return (ctx.input_responses or {}).get(key)


def field(answer: InputResponse | None, name: str) -> Any:
    """A field of an accepted elicitation; None when it was declined, cancelled or not this kind."""
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return answer.content.get(name)
    return None


def sampled(answer: InputResponse | None) -> str | None:
    if isinstance(answer, CreateMessageResult) and answer.content.type == "text":
        return answer.content.text
    return None


def roots(answer: InputResponse | None) -> str | None:
    if isinstance(answer, ListRootsResult):
        return ", ".join(f"{root.uri} ({root.name})" for root in answer.roots)
    return None


async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user's name"""
    name = field(answer_of(ctx, "user_name"), "name")
    if name is None:
        return InputRequiredResult(input_requests={"user_name": form("What is your name?", "name")})
    return f"Hello, {name}!"


async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's LLM a question"""
    reply = sampled(answer_of(ctx, "capital_question"))
    if reply is None:
        question = sample("What is the capital of France?", 100)
        return InputRequiredResult(input_requests={"capital_question": question})
    return f"The model answered: {reply}"


async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks the client for its roots"""
    listed = roots(answer_of(ctx, "client_roots"))
    if listed is None:
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})
    return f"Roots: {listed}"


async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation, carrying state the client must echo"""
    if ctx.request_state == "awaiting-confirmation" and answer_of(ctx, "confirm") is not None:
        return f"state-ok: ok={field(answer_of(ctx, 'confirm'), 'ok')}"
    confirm = form("Please confirm", "ok", "boolean")
    return InputRequiredResult(input_requests={"confirm": confirm}, request_state="awaiting-confirmation")


async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Asks three things in one round: a name, a sampled greeting and the roots"""
    wanted: dict[str, InputRequest] = {
        "user_name": form("What is your name?", "name"),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    missing = {key: ask for key, ask in wanted.items() if answer_of(ctx, key) is None}
    if missing:
        return InputRequiredResult(input_requests=missing, request_state="multiple-inputs")
    name, greeting = field(answer_of(ctx, "user_name"), "name"), sampled(answer_of(ctx, "greeting"))
    return f"{greeting} {name}; roots: {roots(answer_of(ctx, 'client_roots'))}"


def round_of(state: str | None) -> dict[str, Any]:
    """multi_round's state: which round, and the name once known. The SDK refuses a state it did not seal
    for this tool (checked: another tool's state gets -32602); whatever still does not read as a round here
    starts over at the first."""
    try:
        loaded = json.loads(state) if state else {}
    except ValueError:
        loaded = {}
    if isinstance(loaded, dict) and loaded.get("round") in range(1, MAX_ROUND + 1):
        return loaded
    return {"round": 0}


async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Asks twice, one round after the other, the state growing between them"""
    state = round_of(ctx.request_state)
    if state["round"] == 1 and answer_of(ctx, "step1") is not None:
        name = field(answer_of(ctx, "step1"), "name")
        color = form("Step 2: What is your favorite color?", "color")
        return InputRequiredResult(
            input_requests={"step2": color}, request_state=json.dumps({"round": 2, "name": name})
        )
    if state["round"] == 2 and answer_of(ctx, "step2") is not None:
        return f"{state.get('name')} likes {field(answer_of(ctx, 'step2'), 'color')}"
    # the first round, or answers that do not fit the state: start over
    first = form("Step 1: What is your name?", "name")
    return InputRequiredResult(input_requests={"step1": first}, request_state=json.dumps({"round": 1}))


async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation; the SDK refuses a request_state that is not the one it sealed"""
    if ctx.request_state is None:
        confirm = form("Please confirm", "ok", "boolean")
        return InputRequiredResult(input_requests={"confirm": confirm}, request_state="round-1")
    return f"state-ok: {ctx.request_state}"


async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    """Asks only for what the client declared: sampling, elicitation, both or neither"""
    declared = ctx.client_capabilities
    asks: dict[str, InputRequest] = {}
    if declared is None or declared.sampling is not None:
        asks["sample"] = sample("Say hello", 50)
    if declared is None or declared.elicitation is not None:
        asks["ask"] = form("What is your name?", "name")
    if not asks or ctx.input_responses:
        return "Nothing more to ask"
    return InputRequiredResult(input_requests=asks, request_state="capability-gated")


async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user a question (SEP-2575: inside the result, never as a request of its own)"""
    answer = answer_of(ctx, "confirmation")
    if answer is None:
        return InputRequiredResult(input_requests={"confirmation": form("Continue?", "ok", "boolean")})
    return f"Elicitation answered: ok={field(answer, 'ok')}"


async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """Asks the user for context (an elicitation) before it returns its messages"""
    context = field(answer_of(ctx, "user_context"), "context")
    if context is None:
        ask = form("What context should the prompt use?", "context")
        return InputRequiredResult(input_requests={"user_context": ask})
    return [UserMessage(TextContent(type="text", text=f"Use this context: {context}"))]


TOOLS: Final = (
    test_input_required_result_elicitation,
    test_input_required_result_sampling,
    test_input_required_result_list_roots,
    test_input_required_result_request_state,
    test_input_required_result_multiple_inputs,
    test_input_required_result_multi_round,
    test_input_required_result_tampered_state,
    test_input_required_result_capabilities,
    test_streaming_elicitation,
)


def register(server: MCPServer[Any]) -> None:
    for tool in TOOLS:
        server.add_tool(tool)
    server.prompt()(test_input_required_result_prompt)
