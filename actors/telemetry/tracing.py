"""The gateway's traces: one SERVER span per client request, one CLIENT span per hop, W3C trace context.

Imported only when tracing is on (tracing_switch.py). One `Tracing` per gateway process, owned by the
gateway's root: made at start, flushed and stopped at its end. Sessions and backends hold it through their
settings and call it at one place per stage:

- a SERVER span per client request (`server`), parented on the request's `_meta.traceparent`;
- a CLIENT span per hop to a backend (`client`), whose context is written into the forwarded request's
  `_meta` (the only carrier over stdio) and which travels in the `Call` itself: a memory channel does not
  carry contextvars, so the span rides in the routed message and the backend's connection ends it;
- a CLIENT span per backend request relayed to a client (`ask`), parented on the backend's own traceparent;
- events on those spans for what the gateway decided (policy denied, rate limited, backend down).

A span here is a small object (ids, times, what its attributes will be made of) put on the export
thread's queue when it ends; the thread, a batch at a time, counts its duration and encodes it
(tracing_wire.py: its name and the attributes of its shape written once and kept), then posts the batch.
Sampling follows OTEL_TRACES_SAMPLER (default parentbased_always_on) or [tracing] sample_ratio
(parent-based); an unsampled span is not encoded but still passes its context on, flagged unsampled.
Every text a span carries (its name, attributes, events, status message) is redacted (runtime/redact.py):
once per shape for what is kept, as it comes for a client's id, an event or an error's message.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from typing import Any, Final

from actors.config.tracing_schema import TracingSettings
from actors.protocol.envelopes import Reply
from actors.protocol.messages import Message, Request, RequestId
from actors.runtime.redact import REDACTOR, redact
from actors.telemetry import tracing_wire as wire
from actors.telemetry.tracing_attributes import (
    MAX_VALUE_CHARS,
    Attributes,
    Peer,
    error_type,
    protocol_version,
    request_attributes,
    result_error_type,
    span_name,
    target_of,
)
from actors.telemetry.tracing_context import Context, carried, parse_traceparent, with_context
from actors.telemetry.tracing_durations import Durations
from actors.telemetry.tracing_export import Counted, Exporter, resource_of, signal_headers, signal_url
from actors.telemetry.tracing_post import post_settings, warn_of_protocol
from actors.telemetry.tracing_sampling import Sampler, sampler_of

SERVER, CLIENT = 2, 3  # OTLP's SpanKind
SAMPLED: Final = 1
MAX_EVENTS: Final = 32  # per span: what a span can be told past this is dropped
ASKS: Final = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})  # relayed asks
MAX_SHAPES: Final = 4096  # encoded names and attributes kept by the export thread; past it, start over
_shapes: dict[tuple[Any, ...], bytes] = {}  # the export thread's alone
EXPORT_HEADERS: Final = "otlp-headers"  # the redactor's group of the exporter's header values


def _id_text(request_id: RequestId) -> str:
    """A JSON-RPC id as its span attribute says it: a client's string redacted, then cut."""
    return (
        str(request_id)[:MAX_VALUE_CHARS]
        if type(request_id) is int
        else redact(str(request_id))[:MAX_VALUE_CHARS]
    )


class Tracing:
    """Owns: the exporter (its thread) and the two duration histograms, until `shutdown`."""

    def __init__(self, exporter: Exporter, sampler: Sampler, server: Durations, client: Durations) -> None:
        self.exporter, self.sampler = exporter, sampler
        self.server_durations, self.client_durations = server, client
        self._random = random.Random(os.urandom(32))

    @classmethod
    def start(cls, settings: TracingSettings, gateway_name: str, environ: Mapping[str, str]) -> Tracing:
        """From [tracing], and what it leaves unset from the OTEL_* variables."""
        name = settings.service_name or environ.get("OTEL_SERVICE_NAME") or gateway_name
        server = Durations("mcp.server.operation.duration", "A client's MCP request, as the gateway served")
        client = Durations("mcp.client.operation.duration", "One MCP hop: to a backend, or to a client")
        if settings.protocol is None:
            warn_of_protocol(environ)
        timeout_s, compression = settings.export_timeout_s, settings.compression
        headers = (signal_headers(environ, "traces"), signal_headers(environ, "metrics"))
        REDACTOR.know(  # a collector's API key: a secret the log and the pages must not show
            EXPORT_HEADERS, {f"otlp-header:{name}": value for each in headers for name, value in each.items()}
        )
        exporter = Exporter(
            traces_url=signal_url(settings.endpoint, environ, "traces"),
            metrics_url=signal_url(settings.endpoint, environ, "metrics"),
            headers=headers,
            resource=resource_of(name, environ),
            durations=(server, client),
            environ=environ,
            posting=(
                post_settings(environ, "traces", timeout_s, compression),
                post_settings(environ, "metrics", timeout_s, compression),
            ),
        )
        return cls(exporter, sampler_of(settings.sample_ratio, environ), server, client)

    def server(
        self, request: Request, peer: Peer, negotiated: str | None, http: str | None = None
    ) -> ServerSpan:
        """The SERVER span of a client's request, its parent the request's `_meta` trace context; `http`, the
        traceparent header of the HTTP request that carried it: the parent when `_meta` has none, else a
        link when it names another span."""
        params = request.params
        parent, ambient = carried(params), parse_traceparent(http) if http is not None else None
        if parent is None and ambient is not None:
            parent, ambient = (*ambient, ""), None
        method, request_id = request.method[:MAX_VALUE_CHARS], request.id  # both the client's text: cut
        if type(request_id) is not int:
            request_id = str(request_id)[:MAX_VALUE_CHARS]
        version = protocol_version(method, params, negotiated)
        shape = (SERVER, method, target_of(method, params), version, peer)
        span = ServerSpan(self, method, self._context(parent), (shape, request_id))
        if ambient is not None and parent is not None and ambient[:2] != parent[:2]:
            span.links = ((ambient[0], ambient[1]),)
        return span

    def client(
        self, parent: ServerSpan | None, call_id: int, method: str, params: dict[str, Any], backend: str
    ) -> tuple[CallSpan, dict[str, Any]]:
        """The CLIENT span of one hop to `backend`, and the params to send with its context in `_meta`
        (a copy: the client's params are never edited)."""
        made = self._context(parent.context if parent is not None else None)
        span = CallSpan(self, method, made, ((CLIENT, method, target_of(method, params), backend), call_id))
        return span, with_context(params, span.context)

    def ask(self, method: str, params: object, backend: str) -> tuple[CallSpan, Any]:
        """The CLIENT span of a backend's request relayed to a client (sampling, elicitation, roots), its
        parent the backend's own trace context; and the params to send the client, with the span's."""
        span = CallSpan(self, method, self._context(carried(params)), ((CLIENT, method, None, backend), None))
        if params is None or isinstance(params, dict):
            params = with_context(params or {}, span.context)
        return span, params

    def _context(self, parent: Context | None) -> tuple[Context, int]:
        """A new span's context under `parent` (None: a new trace), and its parent's span id (0: none)."""
        span_id = self._random.getrandbits(64) or 1
        if parent is None:
            trace_id = self._random.getrandbits(128) or 1
            flags = SAMPLED if self.sampler.root(trace_id) else 0
            return (trace_id, span_id, flags, ""), 0
        trace_id, parent_id, parent_flags, state = parent
        flags = SAMPLED if self.sampler.child(trace_id, parent_flags & SAMPLED) else 0
        return (trace_id, span_id, flags, state), parent_id

    def shutdown(self, timeout_s: float) -> None:
        """Export what is queued and the histograms, and stop the thread (blocking: run it in a thread)."""
        self.exporter.shutdown(timeout_s)


class _Span:
    """A span from its start to its end on the event loop's thread, then the export thread's: what the hot
    path does is take ids and times and queue it; its name and attributes are made from `inputs` (its shape
    and its JSON-RPC id) when the export thread encodes it (`exported`)."""

    __slots__ = (
        "context", "end_ns", "events", "failure", "inputs", "links", "method", "parent_id", "reason",
        "start_ns", "tracing",
    )  # fmt: skip
    KIND = SERVER

    def __init__(
        self, tracing: Tracing, method: str, made: tuple[Context, int], inputs: tuple[Any, ...]
    ) -> None:
        self.tracing, self.method, self.inputs = tracing, method, inputs
        self.context, self.parent_id = made
        self.start_ns, self.end_ns = time.time_ns(), 0
        self.events: list[tuple[int, str, Attributes]] | None = None
        self.links: tuple[tuple[int, int], ...] = ()
        self.failure: str | None = None
        self.reason = ""

    def trace_id(self) -> str:
        """Its trace id, as its traceparent writes it."""
        return f"{self.context[0]:032x}"

    def traceparent(self) -> str:
        """Its context as a W3C traceparent: what a request it causes carries."""
        trace_id, span_id, flags, _ = self.context
        return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"

    @property
    def sampled(self) -> bool:
        return bool(self.context[2] & SAMPLED)

    @property
    def ended(self) -> bool:
        return self.tracing is None

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        """What the gateway decided, at this moment; a text among `attributes` (a backend's error message,
        say) is cut to MAX_VALUE_CHARS."""
        if self.tracing is not None and self.context[2] & SAMPLED:
            if self.events is None:
                self.events = []
            if len(self.events) < MAX_EVENTS:
                items = {  # redacted before the cut: a secret the cut would split is taken out whole
                    key: redact(value)[:MAX_VALUE_CHARS] if isinstance(value, str) else value
                    for key, value in (attributes or {}).items()
                }
                self.events.append((time.time_ns(), name, items))

    def _end(self, failure: str | None, reason: str) -> None:
        tracing = self.tracing
        if tracing is None:
            return  # ended already
        self.tracing = None  # type: ignore[assignment]
        reason = redact(reason)[:MAX_VALUE_CHARS] if reason else ""  # a backend's error text, say
        self.failure, self.reason, self.end_ns = failure, reason, time.time_ns()
        tracing.exporter.put(self)

    # --- the export thread's ---------------------------------------------------------------------------

    def exported(self, counted: tuple[Counted, Counted]) -> bytes | None:
        """Its duration noted for the batch's count (server, client), and its encoding when it is sampled."""
        start_ns, end_ns, failure = self.start_ns, self.end_ns, self.failure
        counted[self.KIND != SERVER].append((self.method, failure, (end_ns - start_ns) / 1e9))
        trace_id, span_id, flags, state = self.context
        if not flags & SAMPLED:
            return None
        shape, numbered = self.inputs
        shared = _shapes.get(shape)
        if shared is None:
            shared = self._shared(shape)
        rest = b"" if numbered is None else wire.request_id_attribute(_id_text(numbered))
        if failure is not None or state or self.events or self.links:
            rest += self._rarer(failure, state)
        return wire.span_entry(trace_id, span_id, self.parent_id, start_ns, end_ns, shared, rest)

    def _shared(self, shape: tuple[Any, ...]) -> bytes:
        """Its name and the attributes it shares with the spans of its shape, encoded once and kept."""
        name, attributes = self.described()
        attributes = {
            key: redact(value) if isinstance(value, str) else value for key, value in attributes.items()
        }
        shared = wire.span_head(redact(name), self.KIND) + wire.attributes(9, attributes)
        if len(_shapes) >= MAX_SHAPES:
            _shapes.clear()
        _shapes[shape] = shared
        return shared

    def _rarer(self, failure: str | None, state: str) -> bytes:
        """What few spans have: an error's attributes and status, a tracestate, events, links."""
        rest, error = b"", None
        if failure is not None:
            own = {"error.type": failure}
            if failure[-1].isdigit():
                own["rpc.response.status_code"] = failure
            rest += wire.attributes(9, own)
            error = self.reason[:256]
        return rest + wire.span_rest(state, self.events or (), self.links, error)

    @property
    def numbered(self) -> RequestId | None:
        """Its JSON-RPC id (the client's, or the gateway's call id)."""
        return self.inputs[1]  # type: ignore[no-any-return]

    def shape(self) -> tuple[Any, ...]:
        """What its name and every attribute but its id and error follow from: small values taken when it
        starts (a name and a version cut to MAX_VALUE_CHARS), never the request's params, which may be
        large and are freed with the request."""
        return self.inputs[0]  # type: ignore[no-any-return]

    def described(self) -> tuple[str, Attributes]:
        """Its name and the attributes of its shape."""
        raise NotImplementedError


class ServerSpan(_Span):
    """A client request's SERVER span, until its answer (`end`, once; later calls do nothing)."""

    __slots__ = ()

    def end(self, answer: Message | None, reason: str = "") -> None:
        """The request answered with `answer` (None: it ended unanswered, `reason` says why)."""
        if answer is None:
            self._end("cancelled", reason)
            return
        error = getattr(answer, "error", None)
        self._end(error_type(answer), error.message if error is not None else "")

    def described(self) -> tuple[str, Attributes]:
        _, method, target, version, peer = self.shape()
        attributes = request_attributes(method, target, None)
        attributes.update(peer)
        if version is not None:
            attributes["mcp.protocol.version"] = version
        return span_name(method, target), attributes


class CallSpan(_Span):
    """One hop's CLIENT span: a call to a backend, or a backend's request to a client. Ended once, by its
    reply (`answered`) or when the gateway gives it up (`cancelled`)."""

    __slots__ = ()
    KIND = CLIENT

    def answered(self, reply: Reply) -> None:
        error = reply.error
        if error is not None:
            self._end(str(error.code), error.message)
        else:
            self._end(result_error_type(reply.result), "")

    def cancelled(self, reason: str) -> None:
        self._end("cancelled", reason)

    def described(self) -> tuple[str, Attributes]:
        _, method, target, backend = self.shape()
        attributes = request_attributes(method, target, None)
        attributes["peer.service" if method not in ASKS else "mcp.gateway.backend"] = backend
        return span_name(method, target), attributes
