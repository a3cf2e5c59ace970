"""What the gateway writes is OTLP as the official protobuf bindings read it, and the spans say what
happened: parentage, sampling, events, errors, the histograms; the queue is bounded; an export that fails
is dropped, never raised."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from support import captured_logs

from actors.protocol.envelopes import Reply
from actors.protocol.messages import ErrorResponse, Request, Response, RpcError
from actors.runtime.redact import REDACTOR
from actors.telemetry import tracing_wire as wire
from actors.telemetry.tracing import Tracing
from actors.telemetry.tracing_attributes import MAX_VALUE_CHARS
from actors.telemetry.tracing_durations import MAX_SERIES, OTHER_ERRORS, Durations
from actors.telemetry.tracing_export import Exporter, pairs, signal_url
from actors.telemetry.tracing_post import Poster, PostSettings
from actors.telemetry.tracing_sampling import Sampler, sampler_of

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
PEER = (("network.transport", "pipe"),)


class Posts:
    """Every post the exporter makes, kept (a real function in place of the HTTP call)."""

    def __init__(self) -> None:
        self.made: list[tuple[str, bytes, dict[str, str]]] = []

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        self.made.append((url, body, headers))

    def spans(self) -> list[Span]:
        found = []
        for url, body, _ in self.made:
            if url.endswith("/v1/traces"):
                request = ExportTraceServiceRequest.FromString(body)
                found += [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        return found

    def metrics(self) -> dict[str, Any]:
        found = {}
        for url, body, _ in self.made:
            if url.endswith("/v1/metrics"):
                request = ExportMetricsServiceRequest.FromString(body)
                for rm in request.resource_metrics:
                    for sm in rm.scope_metrics:
                        found.update({metric.name: metric for metric in sm.metrics})
        return found


def tracing(posts: Posts, sampler: Sampler | None = None, **environ: str) -> Tracing:
    server, client = (
        Durations("mcp.server.operation.duration", ""),
        Durations("mcp.client.operation.duration", ""),
    )
    exporter = Exporter(
        traces_url="http://collector/v1/traces",
        metrics_url="http://collector/v1/metrics",
        headers=({"authorization": "Bearer t"}, {}),
        resource={"service.name": "gw"},
        durations=(server, client),
        environ=environ,
        post=posts,
    )
    return Tracing(exporter, sampler or Sampler(), server, client)


def attributes(span: Span) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in span.attributes}


def test_a_request_and_its_hop_decode_as_parent_and_child_under_the_clients_trace() -> None:
    posts = Posts()
    traced = tracing(posts)
    request = Request(7, "tools/call", {"name": "add", "_meta": {"traceparent": TRACEPARENT}})
    server = traced.server(request, PEER, "2025-11-25")
    hop, params = traced.client(server, 99, "tools/call", request.params, "alpha")  # type: ignore[arg-type]
    hop.event("mcp.gateway.backend_down", {"reason": "its connection closed"})
    hop.answered(Reply(error=RpcError(-32001, "backend 'alpha' is unavailable")))
    server.end(ErrorResponse(7, RpcError(-32001, "backend 'alpha' is unavailable")))
    server.end(Response(7, {}))  # a second end does nothing
    traced.shutdown(5.0)
    spans = {span.kind: span for span in posts.spans()}
    assert len(posts.spans()) == 2
    outer, inner = spans[Span.SPAN_KIND_SERVER], spans[Span.SPAN_KIND_CLIENT]
    assert outer.trace_id.hex() == inner.trace_id.hex() == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert outer.parent_span_id.hex() == "00f067aa0ba902b7" and inner.parent_span_id == outer.span_id
    assert params["_meta"]["traceparent"] == f"00-{inner.trace_id.hex()}-{inner.span_id.hex()}-01"
    assert outer.name == inner.name == "tools/call add"
    assert attributes(outer)["error.type"] == "-32001" and outer.status.code == outer.status.STATUS_CODE_ERROR
    assert attributes(outer)["mcp.protocol.version"] == "2025-11-25"
    assert attributes(inner)["peer.service"] == "alpha" and attributes(inner)["jsonrpc.request.id"] == "99"
    assert [(event.name, event.attributes[0].value.string_value) for event in inner.events] == [
        ("mcp.gateway.backend_down", "its connection closed")
    ]
    assert outer.start_time_unix_nano <= outer.end_time_unix_nano
    assert posts.made[0][2] == {"authorization": "Bearer t"}
    histograms = posts.metrics()
    point = histograms["mcp.server.operation.duration"].histogram.data_points[0]
    assert point.count == 1 and sum(point.bucket_counts) == 1 and len(point.explicit_bounds) == 14
    assert {kv.key: kv.value.string_value for kv in point.attributes} == {
        "mcp.method.name": "tools/call",
        "error.type": "-32001",
    }
    assert histograms["mcp.client.operation.duration"].histogram.aggregation_temporality == 2  # cumulative


def test_an_unsampled_trace_records_nothing_and_passes_its_flag_on() -> None:
    posts = Posts()
    traced = tracing(posts)
    unsampled = TRACEPARENT[:-2] + "00"
    server = traced.server(
        Request(1, "tools/call", {"name": "a", "_meta": {"traceparent": unsampled}}), PEER, None
    )
    hop, params = traced.client(server, 2, "tools/call", {"name": "a"}, "alpha")
    assert params["_meta"]["traceparent"].endswith("-00")
    hop.answered(Reply(result={}))
    server.end(Response(1, {}))
    never = tracing(posts, sampler_of(0.0, {}))  # a new trace under ratio 0
    never.server(Request(2, "ping", {}), PEER, None).end(Response(2, {}))
    traced.shutdown(5.0)
    never.shutdown(5.0)
    assert posts.spans() == []
    assert "mcp.server.operation.duration" in posts.metrics()  # durations count whether sampled or not


def test_the_samplers_follow_the_standard_variables() -> None:
    assert sampler_of(None, {}) == Sampler(True, 1.0)
    assert sampler_of(
        None, {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}
    ) == Sampler(False, 0.25)
    assert sampler_of(None, {"OTEL_TRACES_SAMPLER": "always_off"}) == Sampler(False, 0.0)
    assert sampler_of(None, {"OTEL_TRACES_SAMPLER": "nonsense"}) == Sampler(True, 1.0)
    assert sampler_of(
        None, {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "7"}
    ) == (
        Sampler(True, 1.0)  # a ratio outside 0..1 is the default
    )
    half = Sampler(False, 0.5)
    assert half.root(1) and not half.root((1 << 64) - 1)  # by the low 64 bits of the trace id, as the SDK
    assert Sampler(True, 0.0).child(5, 1) and not Sampler(True, 1.0).child(5, 0)


@pytest.mark.parametrize("argument", ["10%", "nan", "-0.5", "1e400"])
def test_a_sampler_argument_that_is_no_ratio_is_named_in_a_warning(argument: str) -> None:
    with captured_logs() as logs:
        sampler = sampler_of(
            None, {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": argument}
        )
    assert sampler == Sampler(False, 1.0)
    assert logs == [f"WARNING OTEL_TRACES_SAMPLER_ARG={argument!r} is not a ratio from 0 to 1; using 1.0"]


def test_a_full_queue_drops_spans_and_a_failed_export_is_dropped_without_raising() -> None:
    def refuse(url: str, body: bytes, headers: dict[str, str]) -> None:
        raise OSError("connection refused")

    traced = tracing(Posts(), OTEL_BSP_MAX_QUEUE_SIZE="2", OTEL_BSP_SCHEDULE_DELAY="600000")
    traced.exporter._post = refuse
    for number in range(5):
        traced.server(Request(number, "tools/list", {}), PEER, None).end(Response(number, {}))
    assert traced.exporter.dropped == 3
    traced.shutdown(5.0)  # the two queued are tried, refused, dropped: nothing raises


def test_a_client_inventing_methods_cannot_grow_the_histograms() -> None:
    durations = Durations("d", "")
    for number in range(MAX_SERIES + 50):
        durations.record(f"made/up/{number}", None, 0.001)
    points = durations.snapshot()
    assert len(points) == MAX_SERIES + 1
    other = [count for labels, count, _, _ in points if labels["mcp.method.name"] == "other"]
    assert other == [50]


def test_a_client_answering_with_codes_of_its_own_cannot_grow_the_histograms() -> None:
    posts = Posts()
    traced = tracing(posts, OTEL_BSP_SCHEDULE_DELAY="600000", OTEL_BSP_MAX_QUEUE_SIZE="5000")
    for number in range(MAX_SERIES + 2000):  # a backend's sampling request, each answered with a new code
        span, _ = traced.ask("sampling/createMessage", {}, "alpha")
        span.answered(Reply(error=RpcError(-40000 - number, "no")))
    traced.shutdown(5.0)
    points = traced.client_durations.snapshot()
    assert len(points) <= MAX_SERIES + OTHER_ERRORS + 1
    assert sum(count for _, count, _, _ in points) == MAX_SERIES + 2000  # every answer still counted
    assert any(labels == {"mcp.method.name": "other", "error.type": "other"} for labels, _, _, _ in points)


def test_a_backends_huge_error_message_in_a_span_event_is_cut() -> None:
    posts = Posts()
    traced = tracing(posts)
    server = traced.server(Request(1, "tools/call", {"name": "add"}), PEER, None)
    hop, _ = traced.client(server, 2, "tools/call", {"name": "add"}, "alpha")
    hop.event("mcp.gateway.sent_again", {"error.type": "-32020", "reason": "x" * 1_000_000, "tries": 2})
    hop.answered(Reply(result={}))
    server.end(Response(1, {}))
    traced.shutdown(5.0)
    (client,) = [span for span in posts.spans() if span.kind == Span.SPAN_KIND_CLIENT]
    (event,) = client.events
    told = {kv.key: kv.value for kv in event.attributes}
    assert told["reason"].string_value == "x" * MAX_VALUE_CHARS and told["tries"].int_value == 2


def test_the_endpoint_and_headers_come_from_the_table_else_the_standard_variables() -> None:
    assert signal_url("http://c:4318/", {}, "traces") == "http://c:4318/v1/traces"
    assert signal_url(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, "traces") == "http://t/x"
    assert signal_url(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e"}, "metrics") == "http://e/v1/metrics"
    assert signal_url(None, {}, "traces") == "http://localhost:4318/v1/traces"
    assert pairs("a=1, b=x%20y,bad,c=\r\nd=2, =3,e=%0D%0AX-Evil: 1") == {"a": "1", "b": "x y"}


def test_hand_written_values_decode_as_the_official_bindings_read_them() -> None:
    items = {"s": "é", "b": True, "i": -5, "f": 0.5, "big": 1 << 70, "o": None}
    body = wire.span(1, 2, 0, "k=v", "n", 2, 10, 20, items, links=[(3, 4)], error="")
    span = Span.FromString(body)
    assert (
        span.trace_state == "k=v"
        and span.parent_span_id == b""
        and span.links[0].span_id.hex() == "0" * 15 + "4"
    )
    values = {kv.key: kv.value for kv in span.attributes}
    assert values["s"].string_value == "é" and values["b"].bool_value is True and values["i"].int_value == -5
    assert values["f"].double_value == 0.5 and values["big"].string_value == str(1 << 70)
    assert values["o"].string_value == "None"
    assert span.status.code == span.status.STATUS_CODE_ERROR and span.status.message == ""


def test_a_span_keeps_nothing_large_of_its_request_until_it_is_exported() -> None:
    posts = Posts()
    traced = tracing(posts)
    huge = "x" * 1_000_000
    request = Request(huge, "m" * 1_000_000, {"name": huge, "arguments": {"blob": huge}})
    span = traced.server(request, PEER, None)
    hop, _ = traced.client(span, 5, "tools/call", {"name": huge, "arguments": {"blob": huge}}, "alpha")
    kept = [span.method, span.inputs, hop.inputs]
    assert len(repr(kept)) < 2000  # names and ids cut; never the params
    hop.answered(Reply(error=RpcError(-32603, huge)))
    span.end(ErrorResponse(huge, RpcError(-32603, huge)))
    assert len(span.reason) <= 256 and len(hop.reason) <= 256
    traced.shutdown(5.0)
    (server,) = [s for s in posts.spans() if s.kind == Span.SPAN_KIND_SERVER]
    assert len(server.name) <= 256 and len(attributes(server)["jsonrpc.request.id"]) <= 256


def test_a_collector_that_answers_garbage_fails_the_export_and_nothing_else() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    served = threading.Event()

    def answer_garbage() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"this is no HTTP\r\n\r\n")
        served.set()

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    traced = tracing(Posts())
    url = f"http://127.0.0.1:{port}/v1/traces"
    traced.exporter._post = None  # the real HTTP posts, to a peer that does not speak HTTP
    traced.exporter._posters = (Poster(url, PostSettings(timeout_s=1.0), traced.exporter._stopped.wait),) * 2
    traced.exporter._send(url, b"\x0a\x00", 0)  # logged and dropped
    assert served.wait(10)
    traced.server(Request(1, "ping", {}), PEER, None).end(Response(1, {}))
    traced.shutdown(5.0)  # the thread lived on to export (and fail) again
    listener.close()
    thread.join(5)


def test_a_woken_thread_posts_full_batches_only_and_the_rest_at_the_schedule() -> None:
    posts = Posts()
    traced = tracing(posts, OTEL_BSP_MAX_EXPORT_BATCH_SIZE="2", OTEL_BSP_SCHEDULE_DELAY="600000")
    traced.shutdown(5.0)  # its thread gone: the test drives the export by hand
    posts.made.clear()
    for number in range(5):
        traced.server(Request(number, "tools/list", {}), PEER, None).end(Response(number, {}))
    traced.exporter._export_spans(everything=False)  # woken by a full batch
    assert [
        len(ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans)
        for _, body, _ in posts.made
    ] == [2, 2]
    assert len(traced.exporter._queue) == 1  # left for the next batch or the schedule, not posted alone
    traced.exporter._export_spans(everything=True)  # the schedule
    assert len(posts.spans()) == 5 and not traced.exporter._queue


def test_no_secret_the_gateway_knows_leaves_in_a_span() -> None:
    """Redaction (runtime/redact.py) of each text a span carries: its name and attributes (a client's tool
    name, its string id), an event's attribute (a secret the cut at MAX_VALUE_CHARS would split is taken out
    whole) and the error's message."""
    secret = "span-secret-3c59dc048e88"
    REDACTOR.know("test-tracing", {"env:SPAN_SECRET": secret})
    try:
        posts = Posts()
        traced = tracing(posts)
        tool = f"lookup-{secret}"
        server = traced.server(Request(f"id-{secret}", "tools/call", {"name": tool}), PEER, None)
        hop, _ = traced.client(server, 2, "tools/call", {"name": tool}, "alpha")
        hop.event("mcp.gateway.backend_down", {"reason": "x" * (MAX_VALUE_CHARS - 5) + secret})
        hop.answered(Reply(error=RpcError(-32000, f"backend said {secret}")))
        server.end(ErrorResponse(f"id-{secret}", RpcError(-32000, f"backend said {secret}")))
        traced.shutdown(5.0)
    finally:
        REDACTOR.know("test-tracing", {})
    spans = posts.spans()
    exported = b"".join(body for _, body, _ in posts.made)
    assert len(spans) == 2 and secret.encode() not in exported and secret[:12].encode() not in exported
    for span in spans:
        assert span.name == "tools/call lookup-[REDACTED:env:SPAN_SECRET]"
        assert span.status.message == "backend said [REDACTED:env:SPAN_SECRET]"
    (server_span,) = [span for span in spans if span.kind == Span.SPAN_KIND_SERVER]
    assert attributes(server_span)["jsonrpc.request.id"] == "id-[REDACTED:env:SPAN_SECRET]"
    (event,) = next(span for span in spans if span.kind == Span.SPAN_KIND_CLIENT).events
    assert event.attributes[0].value.string_value == "x" * (MAX_VALUE_CHARS - 5) + "[REDA"  # then cut
