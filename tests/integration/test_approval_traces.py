"""Every approval question and answer is an event on the call's SERVER span (#36): the gateway, a real
process with [tracing], exports to a receiver started here while the official SDK client answers, in each era.
A declined call has no hop to its backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import mcp_types as types
import pytest
import trio
from otlp_receiver import ReceivedSpan, Receiver, otlp_receiver
from support import backend_entry, sdk_client, write_config

GATEWAY: Final = "gateway-under-test"
SERVER, CLIENT = 2, 3  # the proto's SpanKind values
CALL: Final = "tools/call delete_item"


def config_for(tmp_path: Path, receiver: Receiver) -> Path:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo", "--destructive")])
    tracing = f'[tracing]\nendpoint = "{receiver.url}"\nservice_name = "{GATEWAY}"\n'
    config.write_text(config.read_text() + "[policy]\napprove_destructive = true\n" + tracing)
    return config


def events_of(span: ReceivedSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(name, dict(attributes)) for name, attributes in span.events]


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_each_question_and_answer_is_a_span_event_and_a_declined_call_has_no_hop(
    tmp_path: Path, era: str
) -> None:
    answers = iter(["accept", "decline"])

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action=next(answers), content={})  # type: ignore[arg-type]

    with otlp_receiver() as receiver:
        config = config_for(tmp_path, receiver)
        async with sdk_client(config, tmp_path / "g.log", mode=era, elicitation_callback=elicit) as client:
            assert not (await client.call_tool("delete_item", {"id": "1"})).is_error
            assert (await client.call_tool("delete_item", {"id": "2"})).is_error
        requests = 4 if era != "legacy" else 2  # a modern client's question and its retry are two requests

        def exported(got: Receiver) -> bool:
            return len(got.named(GATEWAY, CALL, SERVER)) == requests

        assert await trio.to_thread.run_sync(receiver.wait_for, exported), receiver.spans
        servers = receiver.named(GATEWAY, CALL, SERVER)
    steps = sorted(
        tuple((name, attributes.get("outcome")) for name, attributes in events_of(span)) for span in servers
    )
    asked, accepted, declined = (
        ("mcp.gateway.approval_asked", None),
        ("mcp.gateway.approval_answered", "accepted"),
        ("mcp.gateway.approval_answered", "declined"),
    )
    if era == "legacy":  # asked and answered during one request
        assert steps == sorted([(asked, accepted), (asked, declined)])
    else:  # asked in the answer to one request, answered by its retry
        assert steps == sorted([(asked,), (asked,), (accepted,), (declined,)])
    rules = {attributes["rule"] for span in servers for _, attributes in events_of(span)}
    assert rules == {"approve_destructive"}
    assert len(receiver.named(GATEWAY, CALL, CLIENT)) == 1  # only the approved call reached the backend
    if era == "legacy":  # the question itself: a request to the client, in the call's trace
        asks = receiver.named(GATEWAY, "elicitation/create", CLIENT)
        assert len(asks) == 2 and {ask.trace_id for ask in asks} == {span.trace_id for span in servers}
