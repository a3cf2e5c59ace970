"""[tracing]: OpenTelemetry traces of every client request and every hop to a backend (actors/telemetry/).

A [tracing] table turns tracing on (`enabled = false` keeps it off whatever the environment says); without
the table it is on only when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. What
the table leaves unset comes from the standard OTEL_* variables (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER,
OTEL_EXPORTER_OTLP_HEADERS, ..._COMPRESSION, ..._TIMEOUT, ..._CERTIFICATE, ...), as the OpenTelemetry SDK
reads them.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

import attrs
from attrs.validators import optional

from actors.config.checks import not_blank, rule

MAX_ENDPOINT_CHARS: Final = 2048  # a URL longer than this is a mistake, not a collector
# one export's longest wait: a day is no collector's answer, and past 2^33 s no socket takes the timeout
MAX_EXPORT_TIMEOUT_S: Final = 86_400.0


def is_http_url(text: str) -> bool:
    """An http(s) URL with a host and nothing a header or a log line could be fooled by."""
    if len(text) > MAX_ENDPOINT_CHARS or any(ord(char) < 0x21 or ord(char) == 0x7F for char in text):
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # raises on a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.query


http_url: Final = rule(
    is_http_url,
    "must be an http:// or https:// URL with a host (the collector's OTLP/HTTP base, such as "
    "http://127.0.0.1:4318), with no spaces, control characters or query",
)
known_compression: Final = rule(lambda value: value in ("gzip", "none"), "must be gzip or none")
served_protocol: Final = rule(
    lambda value: value == "http/protobuf",
    "must be http/protobuf: the gateway exports OTLP over HTTP in protobuf (grpc and http/json: not served)",
)
export_timeout: Final = rule(
    lambda value: 0 < value <= MAX_EXPORT_TIMEOUT_S,
    f"must be greater than 0 and at most {MAX_EXPORT_TIMEOUT_S:g} (a day)",
)
ratio: Final = rule(lambda value: 0.0 <= value <= 1.0, "must be between 0 and 1 (1: every trace)")


@attrs.frozen(kw_only=True)
class TracingSettings:
    """[tracing]."""

    enabled: bool = True  # the table's presence turns tracing on; false turns it off
    # the collector's OTLP/HTTP base URL; traces go to {endpoint}/v1/traces (unset: the OTEL_* variables,
    # else http://localhost:4318)
    endpoint: str | None = attrs.field(default=None, validator=optional(http_url))
    service_name: str | None = attrs.field(default=None, validator=optional(not_blank))  # else [gateway] name
    # the share of new traces recorded; a client's sampled traceparent is always followed (parent-based).
    # Unset: OTEL_TRACES_SAMPLER (default: every trace)
    sample_ratio: float | None = attrs.field(default=None, validator=optional(ratio))
    # one export's longest wait, retries included (unset: OTEL_EXPORTER_OTLP_{TRACES_,}TIMEOUT, else 10 s)
    export_timeout_s: float | None = attrs.field(default=None, validator=optional(export_timeout))
    # gzip or none (unset: OTEL_EXPORTER_OTLP_{TRACES_,}COMPRESSION, else none)
    compression: str | None = attrs.field(default=None, validator=optional(known_compression))
    # the OTLP protocol: http/protobuf, the one the gateway exports (unset: the same; a variable naming
    # another is warned of at start)
    protocol: str | None = attrs.field(default=None, validator=optional(served_protocol))
