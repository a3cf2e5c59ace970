"""Rate limits (GCRA, gcra.py) and caps on calls in flight (inflight.py), per caller (limiter.py)."""

from actors.limits.limiter import Limiter as Limiter
from actors.limits.limiter import LimitSettings as LimitSettings
from actors.limits.limiter import Refusal as Refusal
