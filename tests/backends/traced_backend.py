#!/usr/bin/env python3
"""The SDK backend of sdk_sampling_server.py with OpenTelemetry exporting: the official Python SDK's server
makes a SERVER span per request whose parent is the request's `_meta` trace context, and its asks to the
client carry its own context. Spans go over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, one post per span
(SimpleSpanProcessor), so a test sees them as they end. Its extra tool `fail` answers with isError."""

from __future__ import annotations

import runpy
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "traced-backend"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

if __name__ == "__main__":
    server = runpy.run_path(str(Path(__file__).with_name("sdk_sampling_server.py")))["server"]

    @server.tool()
    async def fail(text: str) -> str:
        """Fail as a tool does: the model reads `text` in a result with isError."""
        raise ValueError(text)

    server.run("stdio")
