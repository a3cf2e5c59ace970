"""Whether the gateway traces, and the one place that imports the tracing modules when it does.

Off by default. On when the config has a [tracing] table (unless it says `enabled = false`), or, without
one, when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED
is not "true"). Off, no tracing module is imported, no thread starts, and every hook is one `is None` test.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from actors.config.tracing_schema import TracingSettings

if TYPE_CHECKING:
    from actors.config import Config
    from actors.telemetry.tracing import Tracing

ENDPOINT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracing_wanted(settings: TracingSettings | None, environ: Mapping[str, str] = os.environ) -> bool:
    """The rule above: the table decides when present, else the standard variables."""
    if settings is not None:
        return settings.enabled
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def open_tracing(config: Config, environ: Mapping[str, str] = os.environ) -> Tracing:
    """The gateway's Tracing (its export thread started): call it once tracing_wanted said yes."""
    from actors.telemetry.tracing import Tracing  # here: a gateway that does not trace imports nothing

    return Tracing.start(config.tracing or TracingSettings(), config.gateway.name, environ)
