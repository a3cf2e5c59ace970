"""The exporter settings a user of the OpenTelemetry SDK expects, each against the real OTLP/HTTP receiver of
tests/otlp_receiver.py: gzip, the timeout, an https collector checked against a CA file, a client
certificate (mTLS), the protocol, retries of what the OTLP specification calls retryable (after the
collector's Retry-After, else with exponential backoff, within the timeout), one kept-alive connection."""

from __future__ import annotations

import socket
import threading
import time
from email.utils import formatdate
from pathlib import Path

import pytest
from otlp_receiver import Receiver, otlp_receiver
from support import captured_logs
from tls_certs import make_pki

from actors.config.tracing_schema import TracingSettings
from actors.protocol.messages import Request, Response
from actors.telemetry import tracing_wire as wire
from actors.telemetry.tracing import Tracing
from actors.telemetry.tracing_post import (
    MAX_BACKOFF_S,
    Poster,
    PostFailed,
    PostSettings,
    backoff_s,
    post_settings,
    retry_after_s,
    warn_of_protocol,
)

PEER = (("network.transport", "pipe"),)


class Waits:
    """A retry's pauses, noted and not waited (a test of backoff need not sleep)."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def pause(self, seconds: float) -> bool:
        self.asked.append(seconds)
        return False  # not stopping


def traced(url: str, **environ: str) -> Tracing:
    return Tracing.start(
        TracingSettings(endpoint=url), "gw", {"OTEL_BSP_SCHEDULE_DELAY": "600000", **environ}
    )


def one_request(tracing: Tracing, number: int = 1) -> None:
    tracing.server(Request(number, "tools/list", {}), PEER, None).end(Response(number, {}))


def a_body() -> bytes:
    """An export request the receiver decodes: one span."""
    span = wire.span_entry(1, 2, 0, 10, 20, wire.span_head("s", 2), b"")
    return wire.trace_request({"service.name": "gw"}, wire.scope("t", "0"), [span])


def trace_posts(receiver: Receiver) -> list[int]:
    return [post.connection for post in receiver.posts if post.path == "/v1/traces"]


def test_gzip_from_the_standard_variable_reaches_the_collector_compressed() -> None:
    with otlp_receiver() as receiver:
        tracing = traced(receiver.url, OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="gzip")
        one_request(tracing)
        tracing.shutdown(10)
        assert len(receiver.spans) == 1  # decoded after gunzip
        encodings = {post.path: post.encoding for post in receiver.posts}
        assert encodings == {"/v1/traces": "gzip", "/v1/metrics": ""}  # the signal's own variable only


def test_posts_go_over_one_kept_alive_connection() -> None:
    with otlp_receiver() as receiver:
        tracing = traced(receiver.url, OTEL_BSP_MAX_EXPORT_BATCH_SIZE="1")  # each span a batch, a post
        for number in range(1, 4):
            one_request(tracing, number)
            assert receiver.wait_for(lambda got, n=number: len(got.spans) == n, 10)  # type: ignore[misc]
        tracing.shutdown(10)
        connections = trace_posts(receiver)
        assert len(connections) == 3 and len(set(connections)) == 1


def test_an_https_collector_is_checked_against_the_ca_file_and_shown_the_client_certificate(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    with otlp_receiver(pki.server_context(require_client=True)) as receiver:
        assert receiver.url.startswith("https://")
        tracing = traced(
            receiver.url,
            OTEL_EXPORTER_OTLP_CERTIFICATE=str(pki.ca),
            OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=str(pki.client_certificate),
            OTEL_EXPORTER_OTLP_CLIENT_KEY=str(pki.client_key),
        )
        one_request(tracing)
        tracing.shutdown(10)
        assert len(receiver.spans) == 1 and receiver.metrics


@pytest.mark.parametrize("without", ["the CA file", "the client certificate"])
def test_an_https_collector_gets_nothing_without_the_ca_file_or_the_client_certificate(
    tmp_path: Path, without: str
) -> None:
    pki = make_pki(tmp_path)
    environ = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca)}
    if without == "the CA file":  # the system's CAs do not know the test's
        environ = {
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(pki.client_certificate),
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": str(pki.client_key),
        }
    with otlp_receiver(pki.server_context(require_client=True)) as receiver, captured_logs() as logs:
        tracing = traced(receiver.url, OTEL_EXPORTER_OTLP_TIMEOUT="2000", **environ)
        one_request(tracing)
        tracing.shutdown(10)
        assert receiver.posts == [] and receiver.spans == []
    assert any("export to https://127.0.0.1" in line and "failed, dropped" in line for line in logs)


def test_a_certificate_file_that_cannot_be_read_is_named_at_start_and_nothing_else_fails(
    tmp_path: Path,
) -> None:
    with captured_logs() as logs:
        tracing = traced("https://127.0.0.1:9", OTEL_EXPORTER_OTLP_CERTIFICATE=str(tmp_path / "missing.pem"))
        one_request(tracing)
        tracing.shutdown(10)
    assert any("ERROR tracing: exports to https://127.0.0.1:9/v1/traces will fail" in line for line in logs)


def test_a_retryable_status_is_tried_again_after_the_collectors_retry_after() -> None:
    waits = Waits()
    with otlp_receiver() as receiver:
        receiver.refuse(503, retry_after="0")
        receiver.refuse(429, retry_after=formatdate(time.time() - 5, usegmt=True))  # a date passed: at once
        poster = Poster(receiver.url + "/v1/traces", PostSettings(timeout_s=10), waits.pause)
        poster.post(a_body(), {})
        assert len(receiver.spans) == 1 and len(receiver.posts) == 3
        assert waits.asked == [0.0, 0.0]
        assert len(set(trace_posts(receiver))) == 1  # an error answer keeps the connection


def test_without_retry_after_the_waits_back_off_exponentially_within_the_timeout() -> None:
    waits = Waits()
    with otlp_receiver() as receiver:
        receiver.refuse(502, times=2)
        poster = Poster(receiver.url + "/v1/traces", PostSettings(timeout_s=10), waits.pause)
        poster.post(a_body(), {})
        assert len(receiver.spans) == 1
        assert (
            0.5 <= waits.asked[0] <= 1.0 and 1.0 <= waits.asked[1] <= 2.0
        )  # 1 s, then 2 s, each with jitter
        receiver.refuse(504, retry_after="30")  # past the timeout: given up at once
        with pytest.raises(PostFailed, match="no time left"):
            poster.post(a_body(), {})
        assert len(waits.asked) == 2
    assert [backoff_s(attempt, 1.0) for attempt in range(7)] == [1, 2, 4, 8, 16, 32, MAX_BACKOFF_S]


def test_a_status_the_specification_does_not_call_retryable_is_final() -> None:
    with otlp_receiver() as receiver:
        receiver.refuse(400)
        receiver.refuse(500)
        poster = Poster(
            receiver.url + "/v1/traces", PostSettings(timeout_s=10), lambda s: pytest.fail("waited")
        )
        for status in ("400", "500"):
            with pytest.raises(PostFailed, match=f"answered {status}"):
                poster.post(a_body(), {})
        assert len(receiver.posts) == 2 and receiver.spans == []


def test_a_collector_that_never_answers_is_given_up_at_the_timeout() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
    started = time.monotonic()
    with pytest.raises(PostFailed):
        Poster(url, PostSettings(timeout_s=0.5), lambda s: False).post(a_body(), {})
    assert time.monotonic() - started < 5  # the timeout, not forever
    thread.join(5)
    for connection in accepted:
        connection.close()
    listener.close()


def test_the_timeout_and_compression_come_from_the_table_else_the_signals_variable_else_the_general_one() -> (
    None
):
    environ = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500"}
    assert post_settings(environ, "traces").timeout_s == 2.5
    assert post_settings(environ, "metrics").timeout_s == 1.0
    assert post_settings(environ, "traces", timeout_s=4.0).timeout_s == 4.0  # [tracing] export_timeout_s
    assert post_settings({}, "traces") == PostSettings(timeout_s=10.0, gzip=False)
    assert post_settings({"OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP"}, "metrics").gzip
    assert not post_settings({"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, "traces", compression="none").gzip
    with captured_logs() as logs:
        assert post_settings({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "traces").timeout_s == 10.0
        assert post_settings({"OTEL_EXPORTER_OTLP_TIMEOUT": "-5"}, "traces").timeout_s == 10.0
        assert not post_settings({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd\x1b[2J"}, "traces").gzip
    assert len(logs) == 3 and "'zstd\\x1b[2j' is not gzip or none" in logs[2]  # shown escaped


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:notaport", "http://127.0.0.1:99999", "http://[::1", "collector:4318"]
)
def test_an_endpoint_variable_that_is_no_url_is_named_and_the_next_setting_used(endpoint: str) -> None:
    with otlp_receiver() as receiver, captured_logs() as logs:
        environ = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": "600000",
        }
        tracing = Tracing.start(TracingSettings(), "gw", environ)  # no crash at start
        one_request(tracing)
        tracing.shutdown(10)
        assert len(receiver.spans) == 1
    assert [line for line in logs if "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in line] == [
        f"WARNING tracing: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={endpoint!r} is not an http:// or https:// URL "
        "with a host; ignored"
    ]


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_BSP_MAX_QUEUE_SIZE": "inf"},
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1e400"},
        {"OTEL_BSP_SCHEDULE_DELAY": "1e300", "OTEL_METRIC_EXPORT_INTERVAL": "1e300"},
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "1e13"},  # 317 years: more than a socket's timeout can hold
    ],
)
def test_a_number_variable_out_of_range_is_named_and_the_spans_still_reach_the_collector(
    environ: dict[str, str],
) -> None:
    with otlp_receiver() as receiver, captured_logs() as logs:
        tracing = traced(receiver.url, **environ)  # no crash at start
        one_request(tracing)
        tracing.shutdown(10)  # the export thread lived to post
        assert len(receiver.spans) == 1
    for value in environ.values():
        assert any(line.startswith("WARNING tracing: ") and repr(value) in line for line in logs)


def test_a_header_no_request_can_carry_is_named_and_left_out_and_the_others_are_sent() -> None:
    headers = "x-tenant=a,bad:name=1,authorization=Bearer%20%E2%82%AC,Content-Length=5,api-key=k"
    with otlp_receiver() as receiver, captured_logs() as logs:
        tracing = traced(receiver.url, OTEL_EXPORTER_OTLP_TRACES_HEADERS=headers)
        one_request(tracing)
        tracing.shutdown(10)
        assert len(receiver.spans) == 1
        (post,) = [post for post in receiver.posts if post.path == "/v1/traces"]
    assert post.headers["x-tenant"] == "a" and post.headers["api-key"] == "k"
    assert "authorization" not in post.headers and "bad:name" not in post.headers
    left_out = [line for line in logs if "OTEL_EXPORTER_OTLP_TRACES_HEADERS header" in line]
    assert len(left_out) == 3 and not any("Bearer" in line for line in left_out)  # never the value
    assert all(name in " ".join(left_out) for name in ("'bad:name'", "'authorization'", "'Content-Length'"))


def test_a_protocol_the_gateway_does_not_export_is_named_in_one_warning_at_start() -> None:
    with captured_logs() as logs:
        warn_of_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        assert logs == []
        warn_of_protocol(
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}
        )
    assert logs == [
        "WARNING tracing: OTEL_EXPORTER_OTLP_PROTOCOL='grpc' is not served; the gateway exports "
        "http/protobuf",
        "WARNING tracing: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='http/json' is not served; the gateway exports "
        "http/protobuf",
    ]


def test_retry_after_is_seconds_or_an_http_date_and_nothing_else() -> None:
    now = 1_000_000.0
    assert retry_after_s("7", now) == 7.0
    assert retry_after_s(formatdate(now + 30, usegmt=True), now) == pytest.approx(30.0)
    assert retry_after_s(formatdate(now - 30, usegmt=True), now) == 0.0
    for garbage in (None, "", "-1", "soon", "1" * 40, "Mon, 99 Foo 2026", "\u00b2", "\u0663"):
        assert retry_after_s(garbage, now) is None
