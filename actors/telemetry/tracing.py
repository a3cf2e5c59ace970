"""The gateway's traces and MCP duration histograms, by the OpenTelemetry SDK, exported over OTLP/HTTP.

Imported only when tracing is on (tracing_switch.py). One `Tracing` per gateway process, owned by the
gateway's root: made at start, flushed and shut down at its end. Sessions and backends hold it through
their settings and call it at one place per stage:

- a SERVER span per client request (`server`), parented on the request's `_meta.traceparent`;
- a CLIENT span per hop to a backend (`client`), whose context is written into the forwarded request's
  `_meta` (the only carrier over stdio) and which travels in the `Call` itself: a memory channel does not
  carry contextvars, so the span rides in the routed message and the backend's connection ends it;
- a CLIENT span per backend request relayed to a client (`ask`), parented on the backend's own traceparent;
- events on those spans for what the gateway decided (policy denied, rate limited, backend down).

Spans are exported in batches by the SDK's worker thread (BatchSpanProcessor), never in a Trio task, and
the provider is never installed as the process' global one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from actors.config.tracing_schema import TracingSettings
from actors.protocol.envelopes import Reply
from actors.protocol.eras import request_meta
from actors.protocol.messages import Message, Request
from actors.telemetry.tracing_attributes import (
    Attributes,
    error_type,
    protocol_version,
    request_attributes,
    result_error_type,
    span_name,
    target_of,
)

SCOPE: Final = "trio-mcp-gateway"
# The semantic conventions' advice for MCP operation durations, in seconds
DURATION_BUCKETS_S: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_propagator: Final = TraceContextTextMapPropagator()


class Tracing:
    """Owns: the tracer and meter providers (their export threads), until `shutdown`.
    Errors: none reach a caller: an export that fails is the SDK's to log and drop."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        self.tracer_provider, self.meter_provider = tracer_provider, meter_provider
        self.tracer = tracer_provider.get_tracer(SCOPE)
        meter = meter_provider.get_meter(SCOPE)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", description="A client's MCP request, as served",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )  # fmt: skip
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s", description="One hop of a request to a backend",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        )  # fmt: skip

    @classmethod
    def start(cls, settings: TracingSettings, gateway_name: str, environ: Mapping[str, str]) -> Tracing:
        """Providers from [tracing], what it leaves unset from the OTEL_* variables (read by the SDK)."""
        name = settings.service_name or environ.get("OTEL_SERVICE_NAME") or gateway_name
        resource = Resource.create({SERVICE_NAME: name})
        ratio = settings.sample_ratio
        sampler = ParentBased(TraceIdRatioBased(ratio)) if ratio is not None else None  # env decides
        tracer_provider = TracerProvider(resource=resource, sampler=sampler)
        base = settings.endpoint.rstrip("/") if settings.endpoint else None
        spans = OTLPSpanExporter(
            endpoint=f"{base}/v1/traces" if base else None, timeout=settings.export_timeout_s
        )
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        metrics = OTLPMetricExporter(
            endpoint=f"{base}/v1/metrics" if base else None, timeout=settings.export_timeout_s
        )
        reader = PeriodicExportingMetricReader(metrics)
        return cls(tracer_provider, MeterProvider(resource=resource, metric_readers=[reader]))

    def server(self, request: Request, peer: Attributes, negotiated: str | None) -> ServerSpan:
        """The SERVER span of a client's request, its parent the request's `_meta` trace context."""
        method, params = request.method, request.params
        attributes = request_attributes(method, params, request.id)
        attributes.update(peer)
        version = protocol_version(method, params, negotiated)
        if version is not None:
            attributes["mcp.protocol.version"] = version
        span = self.tracer.start_span(
            span_name(method, target_of(method, params)), context=carried(params), kind=SpanKind.SERVER,
            attributes=attributes,
        )  # fmt: skip
        return ServerSpan(self, span, method)

    def client(
        self, parent: ServerSpan | None, call_id: int, method: str, params: dict[str, Any], backend: str
    ) -> tuple[CallSpan, dict[str, Any]]:
        """The CLIENT span of one hop to `backend`, and the params to send with its context in `_meta`
        (a copy: the client's params are never edited)."""
        attributes = request_attributes(method, params, call_id)
        attributes["peer.service"] = backend
        context = set_span_in_context(parent.span) if parent is not None and parent.span is not None else None
        span = self.tracer.start_span(
            span_name(method, target_of(method, params)), context=context, kind=SpanKind.CLIENT,
            attributes=attributes,
        )  # fmt: skip
        return CallSpan(self, span, method), with_context(params, span)

    def ask(self, method: str, params: object, backend: str) -> tuple[CallSpan, Any]:
        """The CLIENT span of a backend's request relayed to a client (sampling, elicitation, roots), its
        parent the backend's own trace context; and the params to send the client, with the span's."""
        attributes = request_attributes(method, params, None)
        attributes["mcp.gateway.backend"] = backend
        span = self.tracer.start_span(
            span_name(method, None), context=carried(params), kind=SpanKind.CLIENT, attributes=attributes
        )
        if params is None or isinstance(params, dict):
            params = with_context(params or {}, span)
        return CallSpan(self, span, method), params

    def shutdown(self) -> None:
        """Flush what is queued and stop the export threads (blocking: run it in a thread)."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


class ServerSpan:
    """A client request's SERVER span, until its answer (`end`, once; later calls do nothing)."""

    __slots__ = ("_started", "method", "span", "tracing")

    def __init__(self, tracing: Tracing, span: Span, method: str) -> None:
        self.tracing, self.span, self.method = tracing, span, method
        self._started = time.perf_counter()

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        if self.span is not None:
            self.span.add_event(name, attributes)

    def end(self, answer: Message | None, reason: str = "") -> None:
        """The request answered with `answer` (None: it ended unanswered, `reason` says why)."""
        span, self.span = self.span, None
        if span is None:
            return
        failure = error_type(answer) if answer is not None else "cancelled"
        _finish(span, failure, reason or _reason(answer))
        labels = {"mcp.method.name": self.method}
        if failure is not None:
            labels["error.type"] = failure
        self.tracing.server_duration.record(time.perf_counter() - self._started, labels)


class CallSpan:
    """One hop's CLIENT span: a call to a backend, or a backend's request to a client. Ended once, by its
    reply (`answered`) or when the gateway gives it up (`cancelled`)."""

    __slots__ = ("_started", "context", "method", "span", "tracing")

    def __init__(self, tracing: Tracing, span: Span, method: str) -> None:
        self.tracing, self.span, self.method = tracing, span, method
        self.context = span.get_span_context()
        self._started = time.perf_counter()

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        if self.span is not None:
            self.span.add_event(name, attributes)

    def trace_id(self) -> str:
        """Its trace id, as its traceparent writes it."""
        return f"{self.context.trace_id:032x}"

    def answered(self, reply: Reply) -> None:
        error = reply.error
        if error is not None:
            self._end(str(error.code), error.message)
        else:
            self._end(result_error_type(reply.result), "")

    def cancelled(self, reason: str) -> None:
        self._end("cancelled", reason)

    def _end(self, failure: str | None, reason: str) -> None:
        span, self.span = self.span, None
        if span is None:
            return
        _finish(span, failure, reason)
        labels = {"mcp.method.name": self.method}
        if failure is not None:
            labels["error.type"] = failure
        self.tracing.client_duration.record(time.perf_counter() - self._started, labels)


def _finish(span: Span, failure: str | None, reason: str) -> None:
    if failure is not None:
        span.set_attribute("error.type", failure)
        if failure.lstrip("-").isdigit():
            span.set_attribute("rpc.response.status_code", failure)
        span.set_status(Status(StatusCode.ERROR, reason[:256] or None))
    span.end()


def _reason(answer: Message | None) -> str:
    error = getattr(answer, "error", None)
    return error.message if error is not None else ""


def carried(params: object) -> Context | None:
    """The W3C trace context a request carries in `_meta` (traceparent, tracestate), or None."""
    meta = request_meta(params)
    if meta is None or "traceparent" not in meta:
        return None
    carrier = {key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)}
    return _propagator.extract(carrier) if carrier else None


def with_context(params: dict[str, Any], span: Span) -> dict[str, Any]:
    """`params` with the span's traceparent (and tracestate) in `_meta`, in place of any there: a copy."""
    context = span.get_span_context()
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["traceparent"] = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    state = context.trace_state.to_header() if context.trace_state else ""
    if state:
        meta["tracestate"] = state
    else:
        meta.pop("tracestate", None)
    return {**params, "_meta": meta}

