"""What a legacy lane (lane.py) takes, and when it may be opened: which calls are a legacy client's that a
lane serves better than the bridge, the lane's states, and the limits on opening it again. Pure: no I/O."""

from __future__ import annotations

import enum
from typing import Final

from actors.protocol.envelopes import BackendCommand, Call

LANE_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})  # those that may ask
RESUMED: Final = ("inputResponses", "requestState")  # a bridged call's next round: the run connection's
LANE_FAILURES_MAX: Final = 3  # lanes of one run that could not open, in a row; then the bridge alone
LANE_BACKOFF_S: Final = 1.0  # after a failure legacy calls take the bridge this long (doubled each time)


def for_lane(command: BackendCommand) -> bool:
    """Whether a command is a legacy client's call that a legacy lane serves better than the bridge."""
    if not isinstance(command, Call) or not command.from_legacy or command.method not in LANE_METHODS:
        return False
    params = command.params or {}
    return not any(key in params for key in RESUMED)


class LaneState(enum.Enum):
    CLOSED = "closed"  # not open: the next legacy call opens it (once the backoff has passed)
    OPENING = "opening"  # spawned or connecting, initializing: calls wait
    OPEN = "open"
    REFUSED = "refused"  # the backend refused initialize: modern-only
    GAVE_UP = "gave up"  # LANE_FAILURES_MAX failed openings in a row in this run
