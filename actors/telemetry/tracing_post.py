"""One signal's OTLP/HTTP posts, as the OpenTelemetry exporters make them: one kept-alive connection to the
collector, gzip when asked, https with a CA file and a client certificate (mTLS), and a failed post tried
again with exponential backoff within the export timeout.

The settings come from [tracing] where it has the key, else from the standard variables, the signal's own
first (OTEL_EXPORTER_OTLP_TRACES_COMPRESSION before OTEL_EXPORTER_OTLP_COMPRESSION): ..._COMPRESSION (gzip
or none), ..._TIMEOUT (milliseconds), ..._CERTIFICATE, ..._CLIENT_CERTIFICATE, ..._CLIENT_KEY. A post is
tried again on the statuses the OTLP specification names retryable (429, 502, 503, 504), after the
collector's Retry-After when it sends one, and on a connection that failed; never past the timeout. Used by
the export thread alone (tracing_export.py).
"""

from __future__ import annotations

import gzip
import http.client
import random
import ssl
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Final
from urllib.parse import urlsplit

import attrs
from loguru import logger

from actors.config.tracing_schema import MAX_EXPORT_TIMEOUT_S

RETRYABLE: Final = frozenset({429, 502, 503, 504})  # the OTLP/HTTP specification's; every other is final
FIRST_BACKOFF_S: Final = 1.0  # then 2, 4, 8, ... (with jitter), up to MAX_BACKOFF_S
MAX_BACKOFF_S: Final = 32.0
ANSWER_READ_MAX: Final = 65536  # of a collector's answer; past it the connection is closed, not drained
PROTOCOL: Final = "http/protobuf"  # the one OTLP protocol the gateway exports
DEFAULT_TIMEOUT_S: Final = 10.0


class PostFailed(Exception):
    """A post the collector refused, or that could not be made within the timeout."""


@attrs.frozen
class PostSettings:
    """How one signal is posted."""

    timeout_s: float = DEFAULT_TIMEOUT_S  # one export's longest wait, retries included
    gzip: bool = False
    ca_file: str | None = (
        None  # the CA an https collector's certificate is checked against (else the system's)
    )
    client_certificate: str | None = None  # with client_key: the gateway's certificate, for mTLS
    client_key: str | None = None


def _variable(environ: Mapping[str, str], signal: str, name: str) -> str | None:
    """OTEL_EXPORTER_OTLP_{SIGNAL}_{NAME}, else OTEL_EXPORTER_OTLP_{NAME}; None when neither is set."""
    for key in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = environ.get(key, "").strip()
        if value:
            return value
    return None


def post_settings(
    environ: Mapping[str, str], signal: str, timeout_s: float | None = None, compression: str | None = None
) -> PostSettings:
    """A signal's settings: `timeout_s` and `compression` from [tracing] when set, the rest from the
    variables. A variable the gateway cannot use is named in a warning and its default used."""
    if timeout_s is None:
        timeout_s = DEFAULT_TIMEOUT_S
        text = _variable(environ, signal, "TIMEOUT")
        if text is not None:
            try:
                timeout_s = float(text) / 1000
            except ValueError:
                timeout_s = -1.0
            if not 0 < timeout_s <= MAX_EXPORT_TIMEOUT_S:
                logger.warning(
                    "tracing: {} timeout {!r} is not milliseconds up to a day; using 10000", signal, text[:64]
                )
                timeout_s = DEFAULT_TIMEOUT_S
    if compression is None:
        compression = (_variable(environ, signal, "COMPRESSION") or "none").lower()
        if compression not in ("gzip", "none"):
            logger.warning(
                "tracing: {} compression {!r} is not gzip or none; using none", signal, compression[:64]
            )
            compression = "none"
    return PostSettings(
        timeout_s=timeout_s,
        gzip=compression == "gzip",
        ca_file=_variable(environ, signal, "CERTIFICATE"),
        client_certificate=_variable(environ, signal, "CLIENT_CERTIFICATE"),
        client_key=_variable(environ, signal, "CLIENT_KEY"),
    )


def warn_of_protocol(environ: Mapping[str, str]) -> None:
    """OTEL_EXPORTER_OTLP_{,TRACES_,METRICS_}PROTOCOL asking for what the gateway does not export (grpc,
    http/json): one line at start saying what it exports instead."""
    for name in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ):
        asked = environ.get(name, "").strip()
        if asked and asked != PROTOCOL:
            logger.warning(
                "tracing: {}={!r} is not served; the gateway exports {}", name, asked[:64], PROTOCOL
            )


def tls_context(settings: PostSettings) -> ssl.SSLContext:
    """What an https collector is checked against, and the client certificate offered (raises OSError or
    ssl.SSLError on a file that cannot be read or is no certificate or key)."""
    context = ssl.create_default_context(cafile=settings.ca_file)
    if settings.client_certificate is not None:
        context.load_cert_chain(settings.client_certificate, settings.client_key)
    return context


def retry_after_s(value: str | None, now: float) -> float | None:
    """A Retry-After header's wait in seconds (delay-seconds or an HTTP-date; `now`: time.time()), or None
    when there is none or it is no such thing."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) < 10:
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def backoff_s(attempt: int, jitter: float) -> float:
    """The wait before try `attempt` + 1 (0: after the first failure): 1 s doubling up to MAX_BACKOFF_S,
    times `jitter` (0.5 to 1: so gateways that failed together do not retry together)."""
    return min(FIRST_BACKOFF_S * 2**attempt, MAX_BACKOFF_S) * jitter


class Poster:
    """Owns: one kept-alive connection to one collector (made again when it fails or the collector closes
    it), until `close`.
    Errors: `post` raises PostFailed (a final status, or the timeout reached), never anything else."""

    def __init__(self, url: str, settings: PostSettings, pause: Callable[[float], bool]) -> None:
        self.settings, self._pause = settings, pause  # pause(s): wait s seconds; True when stopping
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._connection: http.client.HTTPConnection | None = None
        self._tls: ssl.SSLContext | None = None
        self._tls_error = ""
        if self._https:
            try:
                self._tls = tls_context(settings)
            except (OSError, ssl.SSLError, ValueError) as exc:  # a missing file, or no certificate in it
                self._tls_error = f"its certificate settings cannot be used: {exc}"
                logger.error("tracing: exports to {} will fail, {}", url, self._tls_error)

    def post(self, body: bytes, headers: dict[str, str]) -> None:
        settings = self.settings
        deadline = time.monotonic() + settings.timeout_s
        if self._https and self._tls is None:
            raise PostFailed(self._tls_error)
        sent = dict(headers)
        sent["Content-Type"] = "application/x-protobuf"
        if settings.gzip:
            body = gzip.compress(body, 6, mtime=0)
            sent["Content-Encoding"] = "gzip"
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PostFailed(f"no answer within {settings.timeout_s:g} s")
            reused = self._connection is not None
            try:
                status, reason, wait_s = self._post_once(body, sent, left)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, not HTTP
                self.close()
                if reused:  # a kept-alive connection the collector had closed: a new one at once
                    continue
                status, reason, wait_s = 0, str(exc) or type(exc).__name__, None
            if 200 <= status < 300:
                return
            if status and status not in RETRYABLE:
                raise PostFailed(f"the collector answered {status} {reason}")
            if wait_s is None:
                wait_s = backoff_s(attempt, random.uniform(0.5, 1.0))
            attempt += 1
            if time.monotonic() + wait_s >= deadline:
                raise PostFailed(f"{status or ''} {reason}; no time left to try again".strip())
            if self._pause(wait_s):
                raise PostFailed(f"{status or ''} {reason}; stopping".strip())

    def _post_once(
        self, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> tuple[int, str, float | None]:
        """One try: the status, its reason, and the collector's Retry-After (seconds) when it is retryable."""
        connection = self._connection
        if connection is None:
            if self._https:
                connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout_s, context=self._tls
                )
            else:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
            self._connection = connection
        else:
            connection.timeout = timeout_s
            if connection.sock is not None:
                connection.sock.settimeout(timeout_s)
        connection.request("POST", self._path, body, headers)
        answer = connection.getresponse()
        answer.read(ANSWER_READ_MAX)
        if answer.will_close or not answer.isclosed():  # the collector closes it, or said more than we read
            self.close()
        wait_s = (
            retry_after_s(answer.getheader("Retry-After"), time.time())
            if answer.status in RETRYABLE
            else None
        )
        return answer.status, answer.reason, wait_s

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
