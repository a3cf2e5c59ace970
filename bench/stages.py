"""Where a forwarded call's CPU goes, per stage of the path, for `scripts/bench --stages`.

A sampler inside the gateway: a CPU-time timer (ITIMER_PROF, so waiting in epoll is never sampled) interrupts
the main thread every INTERVAL_S of CPU, and the sample goes to the stage of the innermost frame that belongs
to the gateway (actors/...): time spent inside a C function (os.read, orjson.loads) or a library (trio's
epoll registration, attrs' __init__) counts for the gateway code that called it. A sample with no gateway
frame on the stack is Trio's run loop itself (scheduling, epoll, waking tasks). Unlike cProfile, which adds
its own cost to every function call and so inflates paths of many small functions, a sample costs the same
wherever it lands.
"""

from __future__ import annotations

import signal
from collections import Counter
from types import FrameType
from typing import Final

INTERVAL_S: Final = 0.0005  # of CPU time between samples: ~2,000 a second of gateway CPU
LOOP: Final = "trio run loop"
OTHER: Final = "other gateway code"
ORDER: Final = (
    "read",
    "decode",
    "validation",
    "routing, policy, limits",
    "middleware",
    "channel hops, handoffs",
    "id remapping, in-flight tables",
    "encode",
    "write",
    "logging",
    "metrics",
    LOOP,
    OTHER,
)
# (module under actors/, function) -> stage; (module, "*") for a whole module. The innermost match wins.
_BY_FUNCTION: Final = {
    ("framing/pipes.py", "receive_some"): "read",
    ("framing/pipes.py", "send_all"): "write",
    ("framing/pipes.py", "send_whole_nowait"): "write",
    ("framing/lines.py", "send"): "write",
    ("framing/lines.py", "send_many"): "write",
    ("framing/lines.py", "send_nowait"): "write",
    ("framing/lines.py", "flush_cork"): "write",
    ("framing/lines.py", "_write_cork"): "write",
    ("framing/burst.py", "*"): "write",
    ("framing/lines.py", "*"): "read",
    ("backends/process.py", "receive"): "read",
    ("backends/process.py", "*"): "write",
    ("session/reader.py", "*"): "read",
    ("backends/connection.py", "read"): "read",
    ("backends/connection.py", "_read"): "read",
    ("backends/connection.py", "request_frame"): "encode",
    ("backends/connection.py", "send_frames"): "write",
    ("backends/connection.py", "*"): "id remapping, in-flight tables",
    ("protocol/codec.py", "encode"): "encode",
    ("protocol/codec.py", "to_wire"): "encode",
    ("protocol/codec.py", "_writable"): "encode",
    ("protocol/codec.py", "*"): "decode",
    ("protocol/exact_integers.py", "*"): "decode",
    ("protocol/messages.py", "*"): "validation",
    ("protocol/eras.py", "*"): "validation",
    ("session/dispatcher.py", "*"): "validation",
    ("session/fields.py", "*"): "validation",
    ("session/budget.py", "*"): "validation",
    ("session/modern.py", "*"): "validation",
    ("session/handlers.py", "*"): "routing, policy, limits",
    ("session/routing.py", "*"): "routing, policy, limits",
    ("session/tools.py", "*"): "routing, policy, limits",
    ("session/guard.py", "*"): "routing, policy, limits",
    ("catalog", "*"): "routing, policy, limits",
    ("policy", "*"): "routing, policy, limits",
    ("limits", "*"): "routing, policy, limits",
    ("middleware", "*"): "middleware",
    ("runtime/channels.py", "*"): "channel hops, handoffs",
    ("session/inflight.py", "deliver"): "channel hops, handoffs",
    ("session/writer.py", "write_now"): "channel hops, handoffs",
    ("session/writer.py", "*"): "write",
    ("backends/door.py", "*"): "channel hops, handoffs",
    ("backends/actor.py", "*"): "channel hops, handoffs",
    ("session/forward.py", "*"): "id remapping, in-flight tables",
    ("session/inflight.py", "*"): "id remapping, in-flight tables",
    ("protocol/envelopes.py", "*"): "id remapping, in-flight tables",
    ("protocol/modern_results.py", "*"): "id remapping, in-flight tables",
    ("backends/ask_owner.py", "*"): "id remapping, in-flight tables",
    ("backends/client_requests.py", "*"): "id remapping, in-flight tables",
    ("backends/round_roots.py", "*"): "id remapping, in-flight tables",
    ("runtime/log.py", "*"): "logging",
    ("admin/meters.py", "*"): "metrics",
    ("telemetry", "*"): "metrics",
}
_LOGURU: Final = "/loguru/"
_TRIO: Final = "/trio/"
_LOOP_FUNCTIONS: Final = ("unrolled_run", "run")  # trio/_core/_run.py: the loop, and what waits on epoll


def stage_of(frame: FrameType | None) -> str:
    """The stage a sample taken in `frame` counts for."""
    while frame is not None:
        path = frame.f_code.co_filename
        if frame.f_code.co_name in _LOOP_FUNCTIONS and _TRIO in path:
            return LOOP  # the loop's own work, below every task (trio.run is called from actors/cli.py)
        if _LOGURU in path:
            return "logging"
        at = path.rfind("/actors/")
        if at >= 0:
            module = path[at + len("/actors/") :]
            function = frame.f_code.co_name
            stage = _BY_FUNCTION.get((module, function)) or _BY_FUNCTION.get((module, "*"))
            if stage is None:
                stage = _BY_FUNCTION.get((module.split("/", 1)[0], "*"), OTHER)
            return stage
        frame = frame.f_back
    return LOOP


class StageSampler:
    """Counts samples per stage while it is on (`start`, `stop`, both called in the main thread).

    Trio hears of signals through a wakeup fd that Python writes a byte to for every signal handled: a
    sampler's signals would wake its loop thousands of times a second and be sampled as loop time. So the
    wakeup fd is switched off while sampling (a signal meant for the gateway then waits for its next wake-up)
    and put back after."""

    def __init__(self) -> None:
        self.samples: Counter[str] = Counter()
        self._wakeup_fd = -1

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        self.samples[stage_of(frame)] += 1

    def start(self) -> None:
        self._wakeup_fd = signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL_S, INTERVAL_S)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        if self._wakeup_fd >= 0:
            signal.set_wakeup_fd(self._wakeup_fd, warn_on_full_buffer=False)
            self._wakeup_fd = -1


def per_call(samples: dict[str, int], cpu_us_per_call: float) -> list[tuple[str, float, float]]:
    """(stage, share of the samples, µs per call) in path order: the measured CPU per call split by share."""
    total = sum(samples.values()) or 1
    return [
        (stage, samples.get(stage, 0) / total, samples.get(stage, 0) / total * cpu_us_per_call)
        for stage in ORDER
    ]
