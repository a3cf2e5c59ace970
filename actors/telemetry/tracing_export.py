"""The export thread: finished spans in batches to {endpoint}/v1/traces, the duration histograms every
export interval to {endpoint}/v1/metrics, as OTLP/HTTP protobuf posts (tracing_wire.py, tracing_post.py).

A thread, not a Trio task: encoding and a blocking POST (and its retries) never hold up the event loop,
and the hot path only appends a finished span to a bounded queue (past its size, spans are dropped and
counted). The thread wakes when a batch is full (or at the schedule) and then encodes and posts full
batches only: a thread that posted whatever few spans had queued meanwhile ran all the time at high rates,
and its GIL hand-offs cost the event loop more than the work itself. Settings not in
[tracing] come from the standard variables, as the OpenTelemetry SDK reads them:
OTEL_EXPORTER_OTLP_{TRACES_,METRICS_,}ENDPOINT, ..._HEADERS (and tracing_post.py's), OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
OTEL_METRIC_EXPORT_INTERVAL.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import Any, Final, Protocol
from urllib.parse import unquote

from loguru import logger

from actors.config.tracing_schema import is_http_url
from actors.telemetry import tracing_wire as wire
from actors.telemetry.tracing_durations import BOUNDS_S, Durations
from actors.telemetry.tracing_post import Poster, PostFailed, PostSettings

DEFAULT_ENDPOINT: Final = "http://localhost:4318"
SCOPE_NAME: Final = "trio-mcp-gateway"
SCOPE_VERSION: Final = "0.1.0"
FAILURE_LOG_S: Final = 30.0  # at most one warning per this many seconds about failed exports
WAIT_MAX_MS: Final = threading.TIMEOUT_MAX * 1000  # the longest wait a thread can be given
HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token
POST_HEADERS: Final = frozenset({"content-type", "content-length", "content-encoding", "transfer-encoding"})
MAX_SPANS: Final = 1 << 32  # a queue or batch size past this is a slip of the keyboard, not a size


def _number(environ: Mapping[str, str], name: str, default: float, lowest: float, highest: float) -> float:
    """A numeric variable, or `default` when it is unset; one that is not a number from `lowest` to
    `highest` is named in a warning, and `default` used."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and lowest <= value <= highest:
        return value
    logger.warning(
        "tracing: {}={!r} is not a number from {:.0f} to {:.0f}; using {:.0f}",
        name,
        text[:64],
        lowest,
        highest,
        default,
    )
    return default


def _endpoint(environ: Mapping[str, str], name: str) -> str | None:
    """A collector URL from the variable `name`; None when it is unset, or when it is no http(s) URL with a
    host (and a port in range), which a warning names: the next setting is used instead."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    if is_http_url(text.partition("?")[0]):  # a signal's own endpoint is used as it is, query included
        return text
    logger.warning("tracing: {}={!r} is not an http:// or https:// URL with a host; ignored", name, text[:64])
    return None


def signal_url(base: str | None, environ: Mapping[str, str], signal: str) -> str:
    """Where a signal goes: [tracing] endpoint + /v1/SIGNAL; else OTEL_EXPORTER_OTLP_SIGNAL_ENDPOINT as it is;
    else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/SIGNAL; else localhost:4318."""
    if base is None:
        own = _endpoint(environ, f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        if own is not None:
            return own
        base = _endpoint(environ, "OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
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
    """A signal's own OTEL_EXPORTER_OTLP_SIGNAL_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS. A header no request
    can carry (a name that is no HTTP token, a value that is not ASCII) or that the post sets itself is
    named in a warning and left out, as the SDK does: one bad header would fail every export."""
    variable = f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS"
    text = environ.get(variable)
    if text is None:
        variable, text = "OTEL_EXPORTER_OTLP_HEADERS", environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    headers = {}
    for name, value in pairs(text).items():
        if HEADER_NAME.fullmatch(name) and value.isascii() and name.lower() not in POST_HEADERS:
            headers[name] = value
        else:  # never the value: it may be a secret
            logger.warning(
                "tracing: {} header {!r} left out: not an HTTP header name, a value that is not ASCII, "
                "or a header the export sets itself",
                variable,
                name[:64],
            )
    return headers


def resource_of(service_name: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The resource every export names: OTEL_RESOURCE_ATTRIBUTES, the service name, the SDK's identity."""
    resource: dict[str, Any] = pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    resource["service.name"] = service_name
    resource["telemetry.sdk.name"] = SCOPE_NAME
    resource["telemetry.sdk.language"] = "python"
    return resource


Counted = list[tuple[str, str | None, float]]  # (method, error.type, seconds): what a Durations records


class Finished(Protocol):
    """A span that has ended: its duration noted in (server, client) for the batch's count, its encoding if
    sampled."""

    def exported(self, counted: tuple[Counted, Counted]) -> bytes | None: ...


class Exporter:
    """Owns: the queue of finished spans (bounded), its thread, and the HTTP posts (one Poster a signal).
    Receives: finished spans from the hot path (`put`, never blocks); it counts their durations, encodes
        the sampled ones and posts them a full batch at a time (or what is queued, every
        OTEL_BSP_SCHEDULE_DELAY), and the histograms at each interval.
    Stops when: `shutdown` (what is queued and the histograms are exported first, within its time).
    Errors: a failed post is dropped and logged at most every FAILURE_LOG_S; nothing reaches a caller."""

    def __init__(
        self,
        *,
        traces_url: str,
        metrics_url: str,
        headers: tuple[dict[str, str], dict[str, str]],
        resource: dict[str, Any],
        durations: tuple[Durations, Durations],
        environ: Mapping[str, str],
        posting: tuple[PostSettings, PostSettings] = (PostSettings(), PostSettings()),
        post: Callable[[str, bytes, dict[str, str]], None] | None = None,
    ) -> None:
        """`posting`: how traces and metrics are posted; `post`, a test's stand-in for the HTTP posts."""
        self.traces_url, self.metrics_url = traces_url, metrics_url
        self.headers, self.resource, self.durations = headers, resource, durations
        self.schedule_s = _number(environ, "OTEL_BSP_SCHEDULE_DELAY", 5000, 1, WAIT_MAX_MS) / 1000
        self.queue_max = int(_number(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, MAX_SPANS))
        self.batch_max = int(_number(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, 1, MAX_SPANS))
        self.metrics_s = _number(environ, "OTEL_METRIC_EXPORT_INTERVAL", 60000, 1, WAIT_MAX_MS) / 1000
        self.dropped = 0  # spans the full queue refused
        self._post = post
        self._scope = wire.scope(SCOPE_NAME, SCOPE_VERSION)
        self._queue: deque[Finished] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._stopped = threading.Event()  # ends a retry's wait at shutdown
        self._posters = (
            Poster(traces_url, posting[0], self._stopped.wait),
            Poster(metrics_url, posting[1], self._stopped.wait),
        )
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
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        next_metrics = time.monotonic() + self.metrics_s
        while not self._stopping:
            woken = self._wake.wait(min(self.schedule_s, max(0.0, next_metrics - time.monotonic())))
            self._wake.clear()
            self._export_spans(everything=not woken)
            if time.monotonic() >= next_metrics:
                self._export_metrics()
                next_metrics = time.monotonic() + self.metrics_s
        self._export_spans(everything=True)
        self._export_metrics()
        for poster in self._posters:
            poster.close()

    def _export_spans(self, everything: bool) -> None:
        """Full batches (woken by one), or `everything` queued (at the schedule, and the end): a batch
        that fills while one is posted waits for the next, so at a high rate the thread posts one full
        batch per wake-up instead of every few spans queued meanwhile."""
        queue, batch_max, durations = self._queue, self.batch_max, self.durations
        while len(queue) >= batch_max or (everything and queue):
            batch, counted = [], ([], [])
            take = queue.popleft
            for _ in range(min(len(queue), batch_max)):
                encoded = take().exported(counted)
                if encoded is not None:
                    batch.append(encoded)
            durations[0].record_all(counted[0])
            durations[1].record_all(counted[1])
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
            if self._post is not None:
                self._post(url, body, self.headers[which])
            else:
                self._posters[which].post(body, self.headers[which])
        except (OSError, ValueError, HTTPException, PostFailed) as exc:  # refused, unreachable, timed out,
            # a final status, or a peer that does not speak HTTP
            if time.monotonic() - self._last_failure >= FAILURE_LOG_S:
                self._last_failure = time.monotonic()
                logger.warning("tracing: export to {} failed, dropped: {}", url, exc)
