"""OTLP's protobuf wire format, written directly: ExportTraceServiceRequest and ExportMetricsServiceRequest.

Why by hand: the OpenTelemetry SDK's span objects and its exporter's encoder cost ~150 us of CPU per
forwarded call (two spans; measured in bench/tracing_cost.py), several times the gateway's own cost per
call. Protobuf's wire format is small and stable (varints, fixed-width numbers, length-prefixed fields;
field numbers from opentelemetry-proto's trace.proto, metrics.proto and common.proto), so a span is a few
byte strings joined, and the attributes that repeat on every span (a method, a tool name, a transport) are
encoded once and kept (`_encoded_attribute`). The tests decode what this writes with the official
opentelemetry-proto bindings.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

_LENGTH, _FIXED64, _VARINT = 2, 1, 0
KNOWN_ATTRIBUTES_MAX: Final = 4096  # encoded (key, value) pairs kept; past it the cache starts over
_fixed64: Final = struct.Struct("<Q").pack
_double: Final = struct.Struct("<d").pack
_attribute_cache: dict[tuple[int, str, Any], bytes] = {}  # the export thread's alone


def varint(value: int) -> bytes:
    """An unsigned varint (a negative int64 as its two's complement in 10 bytes, as protobuf writes it)."""
    if value < 0:
        value += 1 << 64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def field_bytes(field: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes, or an embedded message."""
    size = len(payload)
    return b"".join((tag(field, _LENGTH), bytes((size,)) if size < 0x80 else varint(size), payload))


def field_text(field: int, text: str) -> bytes:
    return field_bytes(field, text.encode("utf-8", "replace"))


def field_fixed64(field: int, value: int) -> bytes:
    return tag(field, _FIXED64) + _fixed64(value)


def field_double(field: int, value: float) -> bytes:
    return tag(field, _FIXED64) + _double(value)


def field_varint(field: int, value: int) -> bytes:
    return tag(field, _VARINT) + varint(value)


def any_value(value: Any) -> bytes:
    """AnyValue: string 1, bool 2, int 3, double 4; anything else as its text."""
    if isinstance(value, bool):
        return field_varint(2, int(value))
    if isinstance(value, int):
        return field_varint(3, value) if -(1 << 63) <= value < (1 << 63) else field_text(1, str(value))
    if isinstance(value, float):
        return field_double(4, value)
    return field_text(1, value if isinstance(value, str) else str(value))


def _encoded_attribute(field: int, key: str, value: Any) -> bytes:
    """A KeyValue under `field`, whole: kept, since most attributes repeat on every span."""
    known = _attribute_cache.get((field, key, value))
    if known is None:
        known = field_bytes(field, field_text(1, key) + field_bytes(2, any_value(value)))
        if len(_attribute_cache) >= KNOWN_ATTRIBUTES_MAX:
            _attribute_cache.clear()
        _attribute_cache[field, key, value] = known
    return known


def attributes(field: int, items: Mapping[str, Any]) -> bytes:
    """Repeated KeyValue under `field`."""
    return b"".join([_encoded_attribute(field, key, value) for key, value in items.items()])


def scope(name: str, version: str) -> bytes:
    """InstrumentationScope: name 1, version 2."""
    return field_text(1, name) + field_text(2, version)


def span(
    trace_id: int,
    span_id: int,
    parent_id: int,
    trace_state: str,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    items: Mapping[str, Any],
    events: Sequence[tuple[int, str, Mapping[str, Any]]] = (),
    links: Sequence[tuple[int, int]] = (),
    error: str | None = None,
) -> bytes:
    """One Span message. `error`: None for an unset status, else ERROR with that message ("" for none)."""
    return span_of_parts(
        trace_id, span_id, parent_id, trace_state, span_head(name, kind), start_ns, end_ns,
        attributes(9, items), events, links, error,
    )  # fmt: skip


def span_head(name: str, kind: int) -> bytes:
    """A span's name (field 5) and kind (6): the same for every span of its shape, so encoded once."""
    return field_text(5, name) + field_varint(6, kind)


# A span's fixed parts, each one struct.pack with its tags: trace_id (1, 16 bytes) and span_id (2, 8 bytes),
# parent_span_id (4, 8 bytes), start and end times (7, 8: fixed64)
_IDS: Final = struct.Struct(">HQQHQ").pack
_PARENT: Final = struct.Struct(">HQ").pack
_TIMES: Final = struct.Struct("<BQBQ").pack
_LOW_64: Final = (1 << 64) - 1


def span_of_parts(
    trace_id: int,
    span_id: int,
    parent_id: int,
    trace_state: str,
    head: bytes,
    start_ns: int,
    end_ns: int,
    encoded_attributes: bytes,
    events: Sequence[tuple[int, str, Mapping[str, Any]]] = (),
    links: Sequence[tuple[int, int]] = (),
    error: str | None = None,
) -> bytes:
    """`span` with its name and kind (`span_head`) and attributes (repeated field 9) encoded already: what
    repeats from one span to the next is encoded once (tracing.py keeps it)."""
    parts = [_IDS(0x0A10, trace_id >> 64, trace_id & _LOW_64, 0x1208, span_id)]
    if parent_id:
        parts.append(_PARENT(0x2208, parent_id))
    parts += (head, _TIMES(0x39, start_ns, 0x41, end_ns), encoded_attributes)
    parts.append(span_rest(trace_state, events, links, error))
    return b"".join(parts)


def size(value: int) -> bytes:
    """A length's varint: one or two bytes for any span (`varint` for the rest)."""
    if value < 0x80:
        return bytes((value,))
    return bytes((value & 0x7F | 0x80, value >> 7)) if value < 0x4000 else varint(value)


def span_entry(
    trace_id: int, span_id: int, parent_id: int, start_ns: int, end_ns: int, shared: bytes, rest: bytes
) -> bytes:
    """A span as an entry of ScopeSpans.spans (field 2), what `trace_request` joins: its ids and times,
    `shared` (name, kind and the attributes of its shape: `span_head` + `attributes(9, ...)`, kept by the
    caller) and `rest` (its own attributes, events, links, status; fields in any order, as protobuf
    reads them). The hot path of tracing: one struct.pack per part, no loop."""
    body = _IDS(0x0A10, trace_id >> 64, trace_id & _LOW_64, 0x1208, span_id)
    if parent_id:
        body += _PARENT(0x2208, parent_id)
    body += _TIMES(0x39, start_ns, 0x41, end_ns) + shared + rest
    length = len(body)
    if 0x80 <= length < 0x4000:
        return bytes((0x12, length & 0x7F | 0x80, length >> 7)) + body
    return b"\x12" + varint(length) + body


def span_rest(
    trace_state: str,
    events: Sequence[tuple[int, str, Mapping[str, Any]]],
    links: Sequence[tuple[int, int]],
    error: str | None,
) -> bytes:
    """What few spans have, for `span_entry`: a tracestate, events, links, an ERROR status (`error`: its
    message, "" for none)."""
    parts = [field_text(3, trace_state)] if trace_state else []
    for time_ns, event_name, event_items in events:
        event = field_fixed64(1, time_ns) + field_text(2, event_name) + attributes(3, event_items)
        parts.append(field_bytes(11, event))
    for link_trace, link_span in links:
        link = field_bytes(1, link_trace.to_bytes(16, "big")) + field_bytes(2, link_span.to_bytes(8, "big"))
        parts.append(field_bytes(13, link))
    if error is not None:
        status = (field_text(2, error) if error else b"") + field_varint(3, 2)  # STATUS_CODE_ERROR
        parts.append(field_bytes(15, status))
    return b"".join(parts)


_REQUEST_ID: Final = field_text(1, "jsonrpc.request.id") + b"\x12"  # its key, and the tag of its value


def request_id_attribute(text: str) -> bytes:
    """The span attribute jsonrpc.request.id (a string KeyValue under field 9): a value that changes with
    every span, so written, not kept. Up to 103 bytes, its lengths are one byte each."""
    value = text.encode("utf-8", "replace")
    length = len(value)
    if length < 104:
        return bytes((0x4A, length + 24)) + _REQUEST_ID + bytes((length + 2, 0x0A, length)) + value
    any_value = b"\x0a" + size(length) + value  # AnyValue.string_value
    pair = _REQUEST_ID + size(len(any_value)) + any_value
    return b"\x4a" + size(len(pair)) + pair


def trace_request(resource: Mapping[str, Any], scope_bytes: bytes, spans: Iterable[bytes]) -> bytes:
    """ExportTraceServiceRequest with one ResourceSpans of one ScopeSpans; `spans` as `span_entry` wrote."""
    scope_spans = field_bytes(1, scope_bytes) + b"".join(spans)
    resource_spans = field_bytes(1, attributes(1, resource)) + field_bytes(2, scope_spans)
    return field_bytes(1, resource_spans)


def histogram_point(
    items: Mapping[str, Any],
    start_ns: int,
    now_ns: int,
    count: int,
    total: float,
    bucket_counts: Sequence[int],
    bounds: Sequence[float],
) -> bytes:
    """HistogramDataPoint: bucket counts and bounds packed, as proto3 writes repeated numbers."""
    packed_counts = b"".join(_fixed64(n) for n in bucket_counts)
    packed_bounds = b"".join(_double(bound) for bound in bounds)
    return b"".join(
        (
            field_fixed64(2, start_ns),
            field_fixed64(3, now_ns),
            field_fixed64(4, count),
            field_double(5, total),
            field_bytes(6, packed_counts),
            field_bytes(7, packed_bounds),
            attributes(9, items),
        )
    )


def histogram_metric(name: str, description: str, unit: str, points: Iterable[bytes]) -> bytes:
    """Metric with a cumulative Histogram (aggregation_temporality 2)."""
    histogram = b"".join(field_bytes(1, point) for point in points) + field_varint(2, 2)
    return field_text(1, name) + field_text(2, description) + field_text(3, unit) + field_bytes(9, histogram)


def metrics_request(resource: Mapping[str, Any], scope_bytes: bytes, metrics: Iterable[bytes]) -> bytes:
    """ExportMetricsServiceRequest with one ResourceMetrics of one ScopeMetrics."""
    scope_metrics = field_bytes(1, scope_bytes) + b"".join(field_bytes(2, one) for one in metrics)
    resource_metrics = field_bytes(1, attributes(1, resource)) + field_bytes(2, scope_metrics)
    return field_bytes(1, resource_metrics)
