"""The cost of tracing (issue #28): the gateway's CPU per forwarded call with [tracing] on and every trace
sampled, over the same gateway's without, per backend, client and calls in flight. The traced gateway
exports to a sink on loopback in a process of its own (an HTTP/1.1 OTLP endpoint that takes every post and
keeps nothing), so the gateway pays for its spans, its histograms and their export in full, and the sink's
work is neither counted as the gateway's nor taken from the bench's clients."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

GATEWAY: Final = "gateway stdio"
TRACED: Final = "gateway traced"
COMPARED: Final = "gateway compared"  # --compare-tree's gateway, untraced and traced
COMPARED_TRACED: Final = "gateway compared traced"
TARGET: Final = 1.25  # at most 25 % more CPU per call traced at 100 % sampling (as issue #34 restated it)
# The budget is judged behind the official SDK's server (what users run; either client). Behind the lean
# template backend a forward costs the gateway 20 to 70 us, less than five times the bare work of two spans
# (ids, times, a traceparent, two encodings, two durations: about 8 us in a loop with warm caches), so no
# Python tracer could keep within 20 % there: those rows show what tracing adds, not judged.
JUDGED_BACKEND: Final = "sdk"


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection open, as a collector does

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_sink() -> None:
    """`python bench/tracing_cost.py`: the sink in a process of its own, its base URL printed first."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


@contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on a free loopback port (its base URL) while the block runs: a process of its
    own, as a collector is, so that reading the posts takes nothing from the bench's clients (the lean
    client runs in the bench's process; a sink there slowed it, and so the gateway's calls)."""
    sink = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        yield sink.stdout.readline().strip()
    finally:
        sink.terminate()
        sink.wait(10)


def traced(config: Path, sink: str) -> Path:
    """A copy of a bench gateway config with [tracing] on, every trace sampled, exported to `sink`."""
    copy = config.with_name(f"{config.stem}-traced.toml")
    tracing = f'\n[tracing]\nendpoint = "{sink}"\nsample_ratio = 1.0\n'
    copy.write_text(config.read_text() + tracing)
    return copy


def tracing_table(cpu: dict[tuple[str, str, int, str], float]) -> list[dict[str, Any]]:
    """For each backend, client and level measured on both paths: CPU per call traced over untraced, met
    or not behind the SDK's server (None: a row not judged); with --compare-tree, the other tree's too."""
    table = []
    for backend, client, level, path in sorted(cpu):
        plain = cpu.get((backend, client, level, GATEWAY))
        if path != TRACED or not plain:
            continue
        ratio = cpu[backend, client, level, path] / plain
        entry = {
            "backend": backend,
            "client": client,
            "concurrency": level,
            "gateway_us_per_call": cpu[backend, client, level, path],
            "against": GATEWAY,
            "against_us_per_call": plain,
            "ratio": ratio,
            "target": TARGET,
            "met": ratio <= TARGET if backend == JUDGED_BACKEND else None,
        }
        other = cpu.get((backend, client, level, COMPARED))
        other_traced = cpu.get((backend, client, level, COMPARED_TRACED))
        if other and other_traced:
            entry["compared_us_per_call"] = other_traced
            entry["compared_ratio"] = other_traced / other
        table.append(entry)
    return table


if __name__ == "__main__":
    serve_sink()
