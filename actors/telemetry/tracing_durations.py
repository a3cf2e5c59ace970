"""The MCP duration histograms: mcp.server.operation.duration (a client's request, as the gateway served
it) and mcp.client.operation.duration (one hop to a backend, or a backend's request relayed to a client).

Cumulative explicit-bucket histograms per (mcp.method.name, error.type), recorded by the export thread
(tracing_export.py: a finished span's duration is counted there), so the hot path pays nothing for them,
and read by it and by the admin listener's /metrics (a lock between the two). A method name is the
client's text: past MAX_SERIES series a new one is counted under "other". An error.type is a peer's
choice too (the code of a backend's error, or of a client's answer to a backend's request): under "other",
past OTHER_ERRORS of them, a new one is counted as "other" as well. So no peer inventing methods or error
codes can grow the table.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any, Final

# The semantic conventions' advice for MCP operation durations, in seconds
BOUNDS_S: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
MAX_SERIES: Final = 256  # (method, error.type) pairs per instrument, before "other" takes the new ones
OTHER_ERRORS: Final = 16  # error types counted under method "other"; past them, (other, other)
OTHER: Final = "other"


class Durations:
    """Owns: one instrument's series (count, sum, bucket counts), from its start."""

    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description
        self.start_ns = time.time_ns()
        self.bounds_s = BOUNDS_S
        self._series: dict[tuple[str, str | None], list[Any]] = {}
        self._lock = threading.Lock()  # the export thread records; /metrics reads from the event loop

    def record(self, method: str, error: str | None, seconds: float) -> None:
        self.record_all([(method, error, seconds)])

    def record_all(self, durations: list[tuple[str, str | None, float]]) -> None:
        """Each (method, error.type, seconds), under one hold of the lock: a batch's spans at a time."""
        all_series, bucket_of = self._series, bisect.bisect_left
        with self._lock:
            for method, error, seconds in durations:
                key = (method, error)
                series = all_series.get(key)
                if series is None:
                    if len(all_series) >= MAX_SERIES:
                        key = (OTHER, error)
                        series = all_series.get(key)
                        if series is None and len(all_series) >= MAX_SERIES + OTHER_ERRORS:
                            key = (OTHER, OTHER)
                            series = all_series.get(key)
                    if series is None:
                        series = all_series[key] = [0.0, [0] * (len(BOUNDS_S) + 1)]
                series[0] += seconds
                series[1][bucket_of(BOUNDS_S, seconds)] += 1

    def snapshot(self) -> list[tuple[dict[str, str], int, float, list[int]]]:
        """Each series' attributes, count, sum and bucket counts, as they are now."""
        with self._lock:
            items = [(key, series[0], list(series[1])) for key, series in self._series.items()]
        points = []
        for (method, error), total, buckets in items:
            count = sum(buckets)
            labels = {"mcp.method.name": method}
            if error is not None:
                labels["error.type"] = error
            points.append((labels, count, total, buckets))
        return points
