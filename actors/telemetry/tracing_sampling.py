"""Which traces are recorded: [tracing] sample_ratio (parent-based), else OTEL_TRACES_SAMPLER and
OTEL_TRACES_SAMPLER_ARG with the SDK's names and rules (default parentbased_always_on).

A ratio keeps a trace when the low 64 bits of its id are below ratio x 2^64, as the SDK's TraceIdRatioBased
does, so every service that samples by ratio keeps the same traces. Parent-based: a request whose parent
was sampled is recorded, one whose parent was not is not, and a new trace goes by the ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs
from loguru import logger

LOW_64: Final = (1 << 64) - 1
RATIOS: Final = {  # name -> (parent-based, ratio when fixed; None: read OTEL_TRACES_SAMPLER_ARG)
    "always_on": (False, 1.0),
    "always_off": (False, 0.0),
    "traceidratio": (False, None),
    "parentbased_always_on": (True, 1.0),
    "parentbased_always_off": (True, 0.0),
    "parentbased_traceidratio": (True, None),
}
DEFAULT: Final = "parentbased_always_on"


@attrs.frozen
class Sampler:
    parent_based: bool = True
    ratio: float = 1.0
    bound: int = attrs.field(init=False)

    @bound.default
    def _bound(self) -> int:
        return round(self.ratio * LOW_64)

    def root(self, trace_id: int) -> bool:
        """Whether a new trace is recorded."""
        return self.ratio >= 1.0 or (trace_id & LOW_64) < self.bound

    def child(self, trace_id: int, parent_sampled: int) -> bool:
        """Whether a span under a parent (sampled or not) is recorded."""
        return bool(parent_sampled) if self.parent_based else self.root(trace_id)


def sampler_of(sample_ratio: float | None, environ: Mapping[str, str]) -> Sampler:
    if sample_ratio is not None:
        return Sampler(True, sample_ratio)
    name = environ.get("OTEL_TRACES_SAMPLER", DEFAULT).strip().lower() or DEFAULT
    if name not in RATIOS:
        logger.warning("OTEL_TRACES_SAMPLER={!r} is not one the gateway knows; using {}", name[:64], DEFAULT)
        name = DEFAULT
    parent_based, ratio = RATIOS[name]
    if ratio is None:
        text = environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1.0"
        try:
            ratio = float(text)
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:
            logger.warning("OTEL_TRACES_SAMPLER_ARG={!r} is not a ratio from 0 to 1; using 1.0", text[:64])
            ratio = 1.0
    return Sampler(parent_based, ratio)
