"""The reader actor under arbitrary input: nothing escapes it, and every line gets exactly one outcome."""

from __future__ import annotations

import orjson
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

from actors.catalog import PREFIX_ON_COLLISION, Catalog, CatalogEvent
from actors.framing.lines import LineStream
from actors.protocol.messages import ErrorResponse, Message, Request
from actors.session.reader import Reader
from actors.session.session import Session
from actors.session.settings import SessionSettings

MAX_BYTES = 256

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
request_shaped = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(0, 2**31) | st.text(max_size=6),
        "method": st.text(max_size=12),
    },
    optional={"params": st.dictionaries(st.text(max_size=5), json_values, max_size=3)},
).map(orjson.dumps)
lines = st.lists(
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" "))
    | json_values.map(orjson.dumps)
    | request_shaped,
    max_size=12,
)


async def read_all(raw_lines: list[bytes]) -> tuple[list[Message], list[Message]]:
    """Run a Reader over these lines; what it sent to the dispatcher and what straight to the writer."""
    source = trio.testing.MemoryReceiveStream()
    source.put_data(b"".join(line + b"\n" for line in raw_lines))
    source.put_eof()
    transport = LineStream(source, trio.testing.MemorySendStream(), MAX_BYTES)
    to_dispatch, dispatched = trio.open_memory_channel[Message](1000)
    to_writer, written = trio.open_memory_channel[Message](1000)
    await Reader(transport, to_dispatch, to_writer).run()  # returns at end of input; nothing may escape
    return list(_drain(dispatched)), list(_drain(written))


def _drain(channel: trio.MemoryReceiveChannel[Message]) -> list[Message]:
    got = []
    while True:
        try:
            got.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines)
def test_every_line_has_exactly_one_outcome(raw_lines: list[bytes]) -> None:
    dispatched, errors = trio.run(read_all, raw_lines)
    meaningful = [line for line in raw_lines if line.strip()]  # blank lines are skipped, silently
    assert len(dispatched) + len(errors) == len(meaningful)
    assert all(isinstance(error, ErrorResponse) for error in errors)


@settings(max_examples=100, deadline=None)
@given(st.lists(request_shaped, min_size=1, max_size=10))
def test_every_request_reaches_the_dispatcher_with_its_id(raw_lines: list[bytes]) -> None:
    dispatched, errors = trio.run(read_all, raw_lines)
    fitting = [orjson.loads(line) for line in raw_lines if len(line) <= MAX_BYTES]
    assert [(m.id, m.method) for m in dispatched if isinstance(m, Request)] == [
        (r["id"], r["method"]) for r in fitting
    ]
    assert len(errors) == len(raw_lines) - len(fitting)  # too large: refused, one answer each


async def run_session(raw_lines: list[bytes]) -> list[dict[str, object]]:
    """A whole session (reader, dispatcher, writer) over memory streams, with no backends; its output."""
    source, sink = trio.testing.MemoryReceiveStream(), trio.testing.MemorySendStream()
    source.put_data(b"".join(line + b"\n" for line in raw_lines))
    source.put_eof()
    _, events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(order=[], request_timeouts_s={}, rule=PREFIX_ON_COLLISION, inbox=events)
    settings = SessionSettings(server_name="property-gateway", settle_timeout_s=1.0, drain_s=1.0)
    with trio.fail_after(10):
        await Session(
            id="prop", transport=LineStream(source, sink, MAX_BYTES), catalog=catalog.watch, settings=settings
        ).run()
    return [orjson.loads(line) for line in sink.get_data_nowait().splitlines()]


INITIALIZE = orjson.dumps(
    {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
)
distinct_requests = st.lists(
    st.fixed_dictionaries(
        {
            "method": st.sampled_from(["ping", "tools/list", "tools/call", "resources/list", "nope"]),
            "params": st.just({})
            | st.dictionaries(st.sampled_from(["name", "cursor", "x"]), json_values, max_size=2),
        }
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(distinct_requests, st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")), max_size=5))
def test_every_request_gets_exactly_one_response_whatever_surrounds_it(
    requests: list[dict[str, object]], garbage: list[bytes]
) -> None:
    lines = [INITIALIZE, b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    for n, request in enumerate(requests):
        lines.append(orjson.dumps({"jsonrpc": "2.0", "id": n, **request}))
        if n < len(garbage):
            lines.append(garbage[n])
    output = trio.run(run_session, lines)
    answered = [message["id"] for message in output if isinstance(message.get("id"), int)]
    assert sorted(answered) == list(range(len(requests)))  # each exactly once
    assert all("method" not in message for message in output)  # notifications are never answered


class _BrokenTransport:
    """A transport whose stream fails in a way nobody planned for."""

    async def receive(self) -> bytes | None:
        raise RuntimeError("the stream exploded")

    async def send(self, frame: bytes) -> None:
        pass

    async def aclose(self) -> None:
        pass


def _broken_session(session_id: str) -> Session:
    """A session over a transport that explodes, with an empty catalog."""
    _, events = trio.open_memory_channel[CatalogEvent](0)
    catalog = Catalog(order=[], request_timeouts_s={}, rule=PREFIX_ON_COLLISION, inbox=events)
    return Session(
        id=session_id,
        transport=_BrokenTransport(),
        catalog=catalog.watch,
        settings=SessionSettings(server_name="g", settle_timeout_s=1.0, drain_s=1.0),
    )


async def test_a_crashing_session_ends_alone_and_is_logged() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="ERROR")
    session = _broken_session("doomed")
    try:
        with trio.fail_after(5):
            await session.run_temporary()  # returns instead of raising into its parent
    finally:
        logger.remove(sink)
    assert session.done.is_set()
    assert any("session crashed" in line and "the stream exploded" in line for line in lines)


async def test_answers_past_the_unread_cap_after_the_session_ended_are_let_be() -> None:
    """An answer may come for a session after it ended (in a backend's task): past max_unread_bytes then,
    nothing is started in its closed nursery and nothing is raised into the backend's task."""
    session = _broken_session("ended")
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        async with trio.open_nursery() as nursery:
            pass
        session._not_reading(nursery, 1 << 30)  # the nursery is closed: no RuntimeError
    finally:
        logger.remove(sink)
    assert not lines  # and no warning about a session that is gone
