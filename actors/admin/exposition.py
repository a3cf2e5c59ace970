"""GET /metrics: the meters and the live state as Prometheus metric families, built at scrape time.

The gateway's own CollectorRegistry (never prometheus-client's global one) holds one collector that reads
the meters (telemetry/meters.py), the catalog's view and the frontends' sessions when scraped, and the
library's process collector (CPU, memory, open files). Nothing is pushed to prometheus-client on the hot path.

    mcp_gateway_calls_total{backend,method,tool}                 answers to clients' calls
    mcp_gateway_call_errors_total{backend,method,tool,code}      of which JSON-RPC errors, by code
    mcp_gateway_call_duration_seconds{backend,method,tool}       histogram, sent to answered
    mcp_gateway_inflight_requests{backend}                       calls sent and not yet answered
    mcp_gateway_backend_restarts_total{backend}                  starts after the first
    mcp_gateway_backend_state{backend,state}                     1 for the backend's state, 0 for the others
    mcp_gateway_backend_bytes_total{backend,direction}           MCP frames to (out) and from (in) it
    mcp_gateway_client_bytes_total{frontend,direction}           MCP frames from (in) and to (out) clients
    mcp_gateway_sessions{frontend}                               open sessions
    mcp_gateway_ready                                            1 when /readyz says ready
    mcp_gateway_policy_decisions_total{method,decision}          [policy] decisions (allow, deny, approve)
    mcp_gateway_limit_refusals_total{kind}                       [limits] refusals: rate, inflight, http
    mcp_gateway_limit_admitted_total                             tools/call counted and let through
    mcp_gateway_jwks_fetches_total{frontend,issuer}              key sets fetched from a trusted issuer
    mcp_gateway_jwks_fetch_failures_total{frontend,issuer}       fetches that failed (the last good set kept)
    mcp_gateway_jwks_keys{frontend,issuer}                       keys held now (0: none fetched yet)
    mcp_server_operation_duration_seconds{mcp_method_name,error_type}  with tracing on: a client's request
    mcp_client_operation_duration_seconds{mcp_method_name,error_type}  with tracing on: one hop

Every label takes values from a bounded set (telemetry/meters.py): `code` is a code the gateway knows or
"other", `tool` one of at most MAX_TOOLS_PER_BACKEND names per backend or "(other)"; a decision's `method` is
one of policy/gate.py's METHODS or "other" (never a principal or a tool: those are in the audit).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs
from prometheus_client import CONTENT_TYPE_LATEST, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from actors.admin.status import StatusModel
from actors.catalog import BackendState
from actors.telemetry.meters import LATENCY_BUCKETS_S, TOOLS_CALL, BackendMeter, CallStats

CONTENT_TYPE: str = CONTENT_TYPE_LATEST
CALL_LABELS = ("backend", "method", "tool")


@attrs.define(eq=False)  # registered by identity
class GatewayCollector(Collector):
    """Reads the status model's sources at each scrape; holds nothing of its own."""

    model: StatusModel

    def collect(self) -> Iterator[Metric]:
        yield from self._calls()
        yield from self._backends()
        yield from self._frontends()
        yield from self._guards()
        yield from self._operations()
        ready = GaugeMetricFamily("mcp_gateway_ready", "1 when the gateway is ready (as /readyz)")
        ready.add_metric([], 1.0 if self.model.readiness()[0] else 0.0)
        yield ready

    def _calls(self) -> Iterator[Metric]:
        calls = CounterMetricFamily("mcp_gateway_calls", "Answers to clients' calls", labels=CALL_LABELS)
        errors = CounterMetricFamily(
            "mcp_gateway_call_errors", "JSON-RPC error answers, by code", labels=(*CALL_LABELS, "code")
        )
        latency = HistogramMetricFamily(
            "mcp_gateway_call_duration_seconds",
            "Time from a call's request sent to its answer",
            labels=CALL_LABELS,
        )
        for name, meter in self.model.meters.backends.items():
            for method, tool, stats in _rows(meter):
                labels = [name, method, tool]
                calls.add_metric(labels, stats.count)
                for code, count in stats.errors.items():
                    errors.add_metric([*labels, str(code)], count)
                latency.add_metric(labels, _cumulative(stats), stats.sum_s)
        yield from (calls, errors, latency)

    def _backends(self) -> Iterator[Metric]:
        inflight = GaugeMetricFamily(
            "mcp_gateway_inflight_requests", "Calls sent to a backend, not yet answered", labels=["backend"]
        )
        restarts = CounterMetricFamily(
            "mcp_gateway_backend_restarts", "Starts of a backend after its first", labels=["backend"]
        )
        state = GaugeMetricFamily(
            "mcp_gateway_backend_state", "1 for the state the backend is in", labels=["backend", "state"]
        )
        traffic = CounterMetricFamily(
            "mcp_gateway_backend_bytes", "MCP frames to and from a backend", labels=["backend", "direction"]
        )
        view = self.model.catalog.value
        for name, status in view.backends.items():
            meter = self.model.meters.backend(name)
            inflight.add_metric([name], meter.inflight())
            restarts.add_metric([name], meter.restarts)
            for each in BackendState:
                state.add_metric([name, each.value], 1.0 if status.state is each else 0.0)
            traffic.add_metric([name, "in"], meter.bytes_in)
            traffic.add_metric([name, "out"], meter.bytes_out)
        yield from (inflight, restarts, state, traffic)

    def _frontends(self) -> Iterator[Metric]:
        sessions = GaugeMetricFamily("mcp_gateway_sessions", "Open client sessions", labels=["frontend"])
        traffic = CounterMetricFamily(
            "mcp_gateway_client_bytes", "MCP frames from and to clients", labels=["frontend", "direction"]
        )
        labels = ["frontend", "issuer"]
        fetches = CounterMetricFamily(
            "mcp_gateway_jwks_fetches", "Key sets fetched from an issuer", labels=labels
        )
        failures = CounterMetricFamily(
            "mcp_gateway_jwks_fetch_failures",
            "Key set fetches that failed; the last good set stays",
            labels=labels,
        )
        held = GaugeMetricFamily("mcp_gateway_jwks_keys", "Keys of an issuer held now", labels=labels)
        for frontend in self.model.frontends():
            sessions.add_metric([frontend.name], len(frontend.sessions))
            for keys in frontend.issuers:  # issuers come from the config: a bounded set
                fetches.add_metric([frontend.name, keys.issuer], keys.fetches)
                failures.add_metric([frontend.name, keys.issuer], keys.failures)
                held.add_metric([frontend.name, keys.issuer], len(keys.current) if keys.current else 0)
        for name, meter in self.model.meters.frontends.items():
            traffic.add_metric([name, "in"], meter.bytes_in)
            traffic.add_metric([name, "out"], meter.bytes_out)
        yield from (sessions, traffic, fetches, failures, held)

    def _guards(self) -> Iterator[Metric]:
        meters = self.model.meters
        if meters.policy is not None and meters.policy.policy is not None:
            decisions = CounterMetricFamily(
                "mcp_gateway_policy_decisions", "[policy] decisions", labels=["method", "decision"]
            )
            for (method, decision), count in sorted(meters.policy.decisions.items()):
                decisions.add_metric([method, decision], count)
            yield decisions
        if meters.limiter is not None and meters.limiter.settings is not None:
            refusals = CounterMetricFamily("mcp_gateway_limit_refusals", "[limits] refusals", labels=["kind"])
            for kind in ("rate", "inflight", "http"):
                refusals.add_metric([kind], meters.limiter.refusals[kind])
            admitted = CounterMetricFamily("mcp_gateway_limit_admitted", "tools/call let through by [limits]")
            admitted.add_metric([], meters.limiter.admitted)
            yield from (refusals, admitted)

    def _operations(self) -> Iterator[Metric]:
        """With tracing on, the MCP semantic conventions' duration histograms, as the OTLP export has them:
        mcp_server_operation_duration_seconds and mcp_client_operation_duration_seconds."""
        for durations in self.model.meters.durations:
            name = durations.name.replace(".", "_").removesuffix("_duration") + "_duration_seconds"
            family = HistogramMetricFamily(
                name, durations.description, labels=["mcp_method_name", "error_type"]
            )
            for labels, _count, total, buckets in durations.snapshot():
                family.add_metric(
                    [labels["mcp.method.name"], labels.get("error.type", "")],
                    _cumulative_counts(buckets, durations.bounds_s),
                    total,
                )
            yield family


def _rows(meter: BackendMeter) -> Iterator[tuple[str, str, CallStats]]:
    """(method, tool, stats) of each tool called and each other method: tool is "" for the others."""
    for tool, stats in meter.tools.items():
        yield TOOLS_CALL, tool, stats
    for method, stats in meter.methods.items():
        yield method, "", stats


def _cumulative(stats: CallStats) -> list[tuple[str, float]]:
    return _cumulative_counts(stats.buckets, LATENCY_BUCKETS_S)


def _cumulative_counts(counts: Sequence[int], bounds_s: Sequence[float]) -> list[tuple[str, float]]:
    """The buckets as Prometheus wants them: cumulative, each named by its upper bound, +Inf last."""
    bounds = [*(repr(bound) for bound in bounds_s), "+Inf"]
    total, buckets = 0, []
    for bound, count in zip(bounds, counts, strict=True):
        total += count
        buckets.append((bound, float(total)))
    return buckets


def make_registry(model: StatusModel) -> CollectorRegistry:
    """The gateway's own registry: its collector and the process collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GatewayCollector(model))
    ProcessCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
