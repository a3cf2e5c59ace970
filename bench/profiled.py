"""Run a module as `python -m` does, under cProfile, profiling only between two signals, for scripts/bench.

    python bench/profiled.py OUT MODULE ARGS...

Like `python -m cProfile -o OUT -m MODULE ARGS...`, except that the profiler is off until SIGUSR1 and off
again after SIGUSR2, so the profile holds the calls the bench made and not the imports and start-up before
them or the shutdown after. OUT is written when MODULE ends, in the format pstats reads.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
from types import FrameType


def main() -> None:
    out, module, *args = sys.argv[1:]
    profiler = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        profiler.disable()
        profiler.dump_stats(out)


if __name__ == "__main__":
    main()
