"""Run a module as `python -m` does, under a profiler that is on only between two signals, for scripts/bench.

    python bench/profiled.py [--stages] OUT MODULE ARGS...

Like `python -m cProfile -o OUT -m MODULE ARGS...`, except that the profiler is off until SIGUSR1 and off
again after SIGUSR2, so the profile holds the calls the bench made and not the imports and start-up before
them or the shutdown after. OUT is written when MODULE ends, in the format pstats reads. With --stages, the
profiler is bench/stages.py's sampler instead of cProfile, and OUT is JSON: samples per stage of the path.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType

import orjson
from stages import INTERVAL_S, StageSampler


def main() -> None:
    stages = sys.argv[1] == "--stages"
    out, module, *args = sys.argv[2:] if stages else sys.argv[1:]
    profiler = StageSampler() if stages else cProfile.Profile()
    on = profiler.start if isinstance(profiler, StageSampler) else profiler.enable
    off = profiler.stop if isinstance(profiler, StageSampler) else profiler.disable

    def start(signum: int, frame: FrameType | None) -> None:
        on()

    def stop(signum: int, frame: FrameType | None) -> None:
        off()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        off()
        if isinstance(profiler, StageSampler):
            figures = {"interval_s": INTERVAL_S, "samples": dict(profiler.samples)}
            Path(out).write_bytes(orjson.dumps(figures))
        else:
            profiler.dump_stats(out)


if __name__ == "__main__":
    main()
