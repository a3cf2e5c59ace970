"""/metrics as Prometheus parses it: every family, built from the meters and the catalog at scrape time."""

from __future__ import annotations

from catalog_double import make_catalog, make_model, ready, restarting
from catalog_double import tell as tell_catalog
from prometheus_client.parser import text_string_to_metric_families

from actors.admin.exposition import make_registry, render
from actors.protocol.envelopes import Call, ReplySlot
from actors.protocol.messages import RpcError


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (each.name, frozenset(each.labels.items())): each.value
        for family in text_string_to_metric_families(text)
        for each in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]


async def test_every_family_from_the_meters_and_the_view() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog)
    tell_catalog(catalog, ready("alpha", "add"))
    tell_catalog(catalog, restarting("beta", "gone"))
    alpha = model.meters.backend("alpha")
    alpha.starts, alpha.bytes_in, alpha.bytes_out = 3, 100, 40
    call = Call(1, "tools/call", {"name": "add"}, "s", ReplySlot())
    alpha.inflight_calls = lambda: [call]
    alpha.answered(call, None, -0.003)
    alpha.answered(call, RpcError(-32001, "slow"), -0.003)
    alpha.answered(Call(2, "prompts/get", {"name": "p"}, "s", ReplySlot()), None, 0.0)
    model.meters.frontend("stdio").bytes_in = 7
    registry = make_registry(model)
    text = render(registry).decode()

    add = {"backend": "alpha", "method": "tools/call", "tool": "add"}
    assert value(text, "mcp_gateway_calls_total", **add) == 2
    assert value(text, "mcp_gateway_calls_total", backend="alpha", method="prompts/get", tool="") == 1
    assert value(text, "mcp_gateway_call_errors_total", **add, code="-32001") == 1
    assert value(text, "mcp_gateway_call_duration_seconds_count", **add) == 2
    assert value(text, "mcp_gateway_call_duration_seconds_bucket", **add, le="0.0025") == 0
    assert value(text, "mcp_gateway_call_duration_seconds_bucket", **add, le="+Inf") == 2
    assert value(text, "mcp_gateway_backend_restarts_total", backend="alpha") == 2
    assert value(text, "mcp_gateway_inflight_requests", backend="alpha") == 1
    assert value(text, "mcp_gateway_inflight_requests", backend="beta") == 0
    assert value(text, "mcp_gateway_backend_state", backend="beta", state="restarting") == 1
    assert value(text, "mcp_gateway_backend_state", backend="beta", state="ready") == 0
    assert value(text, "mcp_gateway_backend_bytes_total", backend="alpha", direction="in") == 100
    assert value(text, "mcp_gateway_client_bytes_total", frontend="stdio", direction="in") == 7
    assert value(text, "mcp_gateway_sessions", frontend="stdio") == 1
    assert value(text, "mcp_gateway_sessions", frontend="http") == 0
    assert value(text, "mcp_gateway_ready") == 1  # settled; beta is down but not required
    assert "process_cpu_seconds_total" in text

    alpha.answered(call, None, -0.003)  # a scrape reads the meters as they are now
    assert value(render(registry).decode(), "mcp_gateway_calls_total", **add) == 3


async def test_a_backend_answering_with_any_integer_code_adds_one_series_not_one_per_code() -> None:
    catalog = make_catalog("alpha")
    model = make_model(catalog)
    tell_catalog(catalog, ready("alpha", "add"))
    alpha = model.meters.backend("alpha")
    call = Call(1, "tools/call", {"name": "add"}, "s", ReplySlot())
    for code in range(10_000, 11_000):
        alpha.answered(call, RpcError(code, "odd"), 0.0)
    alpha.answered(call, RpcError(-32602, "bad"), 0.0)
    text = render(make_registry(model)).decode()
    codes = {
        labels["code"]
        for (name, labels_set) in samples(text)
        if name == "mcp_gateway_call_errors_total"
        for labels in (dict(labels_set),)
    }
    assert codes == {"other", "-32602"}
    add = {"backend": "alpha", "method": "tools/call", "tool": "add"}
    assert value(text, "mcp_gateway_call_errors_total", **add, code="other") == 1000
