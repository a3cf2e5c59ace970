"""The export thread: finished spans in batches to {endpoint}/v1/traces, the duration histograms every
export interval to {endpoint}/v1/metrics, as OTLP/HTTP protobuf posts (tracing_wire.py).

A thread, not a Trio task: encoding and a blocking POST never hold up the event loop, and the hot path
only appends a finished span to a bounded queue (past its size, spans are dropped and counted). Settings
not in [tracing] come from the standard variables, as the OpenTelemetry SDK reads them:
OTEL_EXPORTER_OTLP_{TRACES_,METRICS_,}ENDPOINT, ..._HEADERS, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_METRIC_EXPORT_INTERVAL.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import Any, Final, Protocol
from urllib.parse import unquote

from loguru import logger

from actors.telemetry import tracing_wire as wire
from actors.telemetry.tracing_durations import BOUNDS_S, Durations

DEFAULT_ENDPOINT: Final = "http://localhost:4318"
SCOPE_NAME: Final = "trio-mcp-gateway"
SCOPE_VERSION: Final = "0.1.0"
ANSWER_READ_MAX: Final = 65536  # of a collector's answer, read before the connection is closed
FAILURE_LOG_S: Final = 30.0  # at most one warning per this many seconds about failed exports


def _number(environ: Mapping[str, str], name: str, default: float, lowest: float) -> float:
    """A numeric variable, or `default` when it is unset, not a number, or below `lowest`."""
    try:
        value = float(environ.get(name, ""))
    except ValueError:
        return default
    return value if value >= lowest else default


def signal_url(base: str | None, environ: Mapping[str, str], signal: str) -> str:
    """Where a signal goes: [tracing] endpoint + /v1/SIGNAL; else OTEL_EXPORTER_OTLP_SIGNAL_ENDPOINT as it is;
    else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/SIGNAL; else localhost:4318."""
    if base is None:
        own = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        if own:
            return own
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    return f"{base.rstrip('/')}/v1/{signal}"


def pairs(text: str) -> dict[str, str]:
    """`key=value,key2=value2` (percent-encoded), as OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES write them;
    a malformed pair is skipped, and no header may hold a line break."""
    found = {}
    for item in text.split(","):
        raw_key, sep, raw_value = item.partition("=")
        key, value = unquote(raw_key), unquote(raw_value)
        if sep and key.strip() and (raw_key + raw_value + key + value).isprintable():
            found[key.strip()] = value.strip()
    return found


def signal_headers(environ: Mapping[str, str], signal: str) -> dict[str, str]:
    own = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS")
    return pairs(own if own is not None else environ.get("OTEL_EXPORTER_OTLP_HEADERS", ""))


def resource_of(service_name: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The resource every export names: OTEL_RESOURCE_ATTRIBUTES, the service name, the SDK's identity."""
    resource: dict[str, Any] = pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    resource["service.name"] = service_name
    resource["telemetry.sdk.name"] = SCOPE_NAME
    resource["telemetry.sdk.language"] = "python"
    return resource


class Finished(Protocol):
    """A span that has ended: its duration counted into (server, client), its encoding if sampled."""

    def exported(self, durations: tuple[Durations, Durations]) -> bytes | None: ...


class Exporter:
    """Owns: the queue of finished spans (bounded), its thread, and the HTTP posts.
    Receives: finished spans from the hot path (`put`, never blocks); it counts their durations, encodes
        the sampled ones, and exports the histograms at each interval.
    Stops when: `shutdown` (what is queued and the histograms are exported first, within its time).
    Errors: a failed post is dropped and logged at most every FAILURE_LOG_S; nothing reaches a caller."""

    def __init__(
        self,
        *,
        traces_url: str,
        metrics_url: str,
        headers: tuple[dict[str, str], dict[str, str]],
        timeout_s: float,
        resource: dict[str, Any],
        durations: tuple[Durations, Durations],
        environ: Mapping[str, str],
        post: Callable[[str, bytes, dict[str, str], float], None] | None = None,
    ) -> None:
        self.traces_url, self.metrics_url, self.timeout_s = traces_url, metrics_url, timeout_s
        self.headers, self.resource, self.durations = headers, resource, durations
        self.schedule_s = _number(environ, "OTEL_BSP_SCHEDULE_DELAY", 5000, 1) / 1000
        self.queue_max = int(_number(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1))
        self.batch_max = int(_number(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1))
        self.metrics_s = _number(environ, "OTEL_METRIC_EXPORT_INTERVAL", 60000, 1) / 1000
        self.dropped = 0  # spans the full queue refused
        self._post = post or _post
        self._scope = wire.scope(SCOPE_NAME, SCOPE_VERSION)
        self._queue: deque[Finished] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._last_failure = -FAILURE_LOG_S
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def put(self, span: Finished) -> None:
        """A finished span (the thread counts and encodes it). Never blocks."""
        queue = self._queue
        if len(queue) >= self.queue_max:
            self.dropped += 1
            return
        queue.append(span)
        if len(queue) == self.batch_max:  # a batch is full: the thread need not wait for its schedule
            self._wake.set()

    def shutdown(self, timeout_s: float) -> None:
        """Export what is queued and the histograms, then stop the thread (blocking, at most `timeout_s`)."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        next_metrics = time.monotonic() + self.metrics_s
        while not self._stopping:
            self._wake.wait(min(self.schedule_s, max(0.0, next_metrics - time.monotonic())))
            self._wake.clear()
            self._export_spans()
            if time.monotonic() >= next_metrics:
                self._export_metrics()
                next_metrics = time.monotonic() + self.metrics_s
        self._export_spans()
        self._export_metrics()

    def _export_spans(self) -> None:
        queue, durations = self._queue, self.durations
        while queue:
            batch = []
            while queue and len(batch) < self.batch_max:
                encoded = queue.popleft().exported(durations)
                if encoded is not None:
                    batch.append(encoded)
            if batch:
                self._send(self.traces_url, wire.trace_request(self.resource, self._scope, batch), 0)

    def _export_metrics(self) -> None:
        now = time.time_ns()
        metrics = []
        for durations in self.durations:
            points = [
                wire.histogram_point(labels, durations.start_ns, now, count, total, buckets, BOUNDS_S)
                for labels, count, total, buckets in durations.snapshot()
            ]
            if points:
                metrics.append(wire.histogram_metric(durations.name, durations.description, "s", points))
        if metrics:
            self._send(self.metrics_url, wire.metrics_request(self.resource, self._scope, metrics), 1)

    def _send(self, url: str, body: bytes, which: int) -> None:
        try:
            self._post(url, body, self.headers[which], self.timeout_s)
        except (OSError, ValueError, HTTPException) as exc:  # refused, unreachable, timed out, an error
            # status, or a peer that does not speak HTTP
            if time.monotonic() - self._last_failure >= FAILURE_LOG_S:
                self._last_failure = time.monotonic()
                logger.warning("tracing: export to {} failed, dropped: {}", url, exc)


def _post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> None:
    request = urllib.request.Request(url, data=body, method="POST")
    for name, value in headers.items():
        request.add_header(name, value)
    request.add_header("Content-Type", "application/x-protobuf")
    with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # the configured URL
        answer.read(ANSWER_READ_MAX)  # what a collector says back is not needed: never all of it
