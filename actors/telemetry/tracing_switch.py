"""Whether the gateway traces, and the one place that imports OpenTelemetry when it does.

Off by default. On when the config has a [tracing] table (unless it says `enabled = false`), or, without
one, when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED
is not "true"). Off, nothing of OpenTelemetry is imported and every hook is one `is None` test.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from actors.config.errors import ConfigError, ConfigProblem
from actors.config.tracing_schema import TracingSettings

if TYPE_CHECKING:
    from actors.config import Config
    from actors.telemetry.tracing import Tracing

ENDPOINT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
REQUIRED: Final = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
NEEDS_EXTRA: Final = (
    "tracing needs the OpenTelemetry SDK and its OTLP/HTTP exporter: install the gateway with its "
    "otel extra (pip install 'trio-mcp-gateway[otel]')"
)


def tracing_wanted(settings: TracingSettings | None, environ: Mapping[str, str]) -> bool:
    """The rule above: the table decides when present, else the standard variables."""
    if settings is not None:
        return settings.enabled
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def check_tracing(config: Config, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the gateway will trace. Raises ConfigError naming the file (and [tracing]) when tracing is
    wanted and the otel extra is not installed. Finds the packages without importing them."""
    if not tracing_wanted(config.tracing, environ):
        return False
    if all(_installed(name) for name in REQUIRED):
        return True
    key = "tracing" if config.tracing is not None else ""
    reason = NEEDS_EXTRA if key else f"{' or '.join(ENDPOINT_VARIABLES)} is set, but {NEEDS_EXTRA}"
    raise ConfigError([ConfigProblem(str(config.path), key, reason)])


def open_tracing(config: Config, environ: Mapping[str, str] = os.environ) -> Tracing:
    """The gateway's Tracing (its export threads started): call it once check_tracing said yes."""
    from actors.telemetry.tracing import Tracing  # here: a gateway that does not trace imports nothing

    return Tracing.start(config.tracing or TracingSettings(), config.gateway.name, environ)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False
