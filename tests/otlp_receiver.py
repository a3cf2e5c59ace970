"""An OTLP/HTTP trace receiver for tests: a real HTTP server on loopback that decodes what exporters post to
/v1/traces with the official protobuf bindings (opentelemetry-proto), as a collector would, and keeps every
span. Tests wait on it for spans by a predicate (no sleeping): `wait_for` blocks a worker thread until the
spans match or the deadline passes.

Like a collector it speaks HTTP/1.1 (a connection kept open between posts), takes gzip, and over TLS when
given a context (https, with or without client certificates). It notes how each post came (`posts`: its
path, Content-Encoding and connection), and answers the next posts with an error when told (`refuse`)."""

from __future__ import annotations

import gzip
import ssl
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import attrs
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

MAX_BODY: Final = 16 * 1024 * 1024


@attrs.frozen
class ReceivedSpan:
    """One span as the collector got it: ids in hex, attributes as Python values."""

    service: str
    name: str
    kind: int  # the proto's enum: 2 SERVER, 3 CLIENT
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: tuple[tuple[str, dict[str, Any]], ...]
    status_code: int  # 2: ERROR
    links: tuple[tuple[str, str], ...] = ()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return (
        getattr(value, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else None
    )


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


@attrs.frozen
class Post:
    """How one post came: its path, its Content-Encoding, which connection (the client's port), and its
    headers (names in lower case)."""

    path: str
    encoding: str
    connection: int
    headers: dict[str, str] = attrs.field(factory=dict, eq=False)


@attrs.define
class Receiver:
    spans: list[ReceivedSpan] = attrs.field(factory=list)
    metrics: list[str] = attrs.field(factory=list)  # names of the metrics received
    posts: list[Post] = attrs.field(factory=list)  # every post, answered or refused
    bodies: list[bytes] = attrs.field(factory=list)  # every post's body as exported (decompressed), kept
    url: str = ""
    _refusals: deque[tuple[int, str | None]] = attrs.field(factory=deque)
    _changed: threading.Condition = attrs.field(factory=threading.Condition)

    def refuse(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        """Answer the next `times` posts with `status` (and a Retry-After header), keeping nothing of them."""
        with self._changed:
            self._refusals.extend([(status, retry_after)] * times)

    def noted(self, post: Post) -> tuple[int, str | None] | None:
        """The post noted; the refusal it gets, if one is due."""
        with self._changed:
            self.posts.append(post)
            self._changed.notify_all()
            return self._refusals.popleft() if self._refusals else None

    def take(self, path: str, body: bytes) -> bytes:
        with self._changed:
            self.bodies.append(body)
        if path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest.FromString(body)
            with self._changed:
                for resource in metrics.resource_metrics:
                    for scope in resource.scope_metrics:
                        self.metrics += [metric.name for metric in scope.metrics]
                self._changed.notify_all()
            return ExportMetricsServiceResponse().SerializeToString()
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource in request.resource_spans:
            service = _attributes(resource.resource.attributes).get("service.name", "")
            for scope in resource.scope_spans:
                for span in scope.spans:
                    received.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            events=tuple(
                                (event.name, _attributes(event.attributes)) for event in span.events
                            ),
                            status_code=span.status.code,
                            links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links),
                        )
                    )
        with self._changed:
            self.spans += received
            self._changed.notify_all()
        return ExportTraceServiceResponse().SerializeToString()

    def wait_for(self, ready: Callable[[Receiver], bool], timeout_s: float = 30.0) -> bool:
        """Block until `ready(self)` holds (True) or `timeout_s` passes (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: ready(self), timeout=timeout_s)

    def named(self, service: str, name: str, kind: int | None = None) -> list[ReceivedSpan]:
        with self._changed:
            return [
                span
                for span in self.spans
                if span.service == service and span.name == name and (kind is None or span.kind == kind)
            ]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # the connection stays open for the next post, as a collector's does

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            if self.path not in ("/v1/traces", "/v1/metrics") or not 0 <= length <= MAX_BODY:
                self.send_error(404 if length <= MAX_BODY else 413)
                return
            body = self.rfile.read(length)
            encoding = self.headers.get("Content-Encoding", "")
            headers = {name.lower(): value for name, value in self.headers.items()}
            refusal = receiver.noted(Post(self.path, encoding, self.client_address[1], headers))
            if refusal is not None:
                status, retry_after = refusal
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            answer = receiver.take(self.path, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the test's output is its own
            pass

    return Handler


@contextmanager
def otlp_receiver(tls: ssl.SSLContext | None = None) -> Iterator[Receiver]:
    """A receiver listening on a free loopback port (its base URL in `url`) while the block runs; over
    https with `tls` (a server context: tls_certs.Pki.server_context)."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    receiver.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
