"""What every session of a gateway shares: its settings, and the limits of one session."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

import attrs

from actors.catalog.clients import ClientDirectory
from actors.catalog.subscriptions import Subscriptions
from actors.discovery.indexes import SearchIndexes
from actors.limits import Limiter
from actors.middleware import Middleware
from actors.output.settings import OutputGate
from actors.policy import PolicyGate
from actors.policy.approval import DestructiveTools
from actors.protocol.envelopes import BackendEvent
from actors.runtime.broadcast import Broadcast
from actors.session.budget import ByteBudget
from actors.session.parked import Bridges
from actors.telemetry.meters import Traffic

if TYPE_CHECKING:
    from actors.routes import RouteState
    from actors.telemetry.tracing import Tracing

MAILBOX_SIZE: Final = 256  # unasked items queued for a session; past it backends' requests are refused
TOO_MANY_REQUESTS: Final = -32000  # the implementation's range: past max_inflight; the session goes on
SESSION_FAILED: Final = "Internal error: the gateway's session failed; reconnect"


class SessionState(enum.Enum):
    NEW = "new"
    INITIALIZING = "initializing"
    OPERATING = "operating"


@attrs.define
class FirstSettle:
    """Whether the gateway's first settle is over: every backend ready or done with its first start, or
    waited for as long as initialize_hold_s allows. Until then a client's first request is held; after it,
    nobody's is."""

    over: bool = False


@attrs.frozen(kw_only=True)
class SessionSettings:
    server_name: str
    settle_timeout_s: float  # longest hold of the first initialize while backends start (initialize_hold_s)
    drain_s: float  # after the client's stream ends, how long in-flight requests may still finish
    page_size: int = 100  # entries per page of an aggregated list
    events: Broadcast[BackendEvent] | None = None  # backends' log messages and resource updates
    clients: ClientDirectory | None = None  # where backends find the only session connected
    middleware: tuple[Middleware, ...] = ()  # around tools/list and tools/call, in config order
    subscriptions: Subscriptions = attrs.field(factory=Subscriptions)  # shared by the gateway's sessions
    max_inflight: int = 256  # requests of one session not yet answered; past it, an error at once
    initialize_within_s: float | None = None  # a network client must finish initialize by then (None: never)
    bridges: Bridges = attrs.field(factory=Bridges)  # modern calls parked on a legacy backend's asks
    # bytes per request and per client, gateway-wide: the ledger parked calls count in too
    budget: ByteBudget = attrs.field(default=attrs.Factory(lambda self: self.bridges.budget, takes_self=True))
    first_settle: FirstSettle = attrs.field(factory=FirstSettle)  # shared by every session of the gateway
    quiet: bool = False  # a session for one request (HTTP, 2026-07-28): its end is logged at DEBUG only
    traffic: Traffic = attrs.field(factory=Traffic)  # its frontend's byte counts (the admin's /metrics)
    policy: PolicyGate | None = None  # the gateway's [policy] in force (a reload swaps its rules)
    limiter: Limiter | None = None  # the gateway's [limits]: buckets per caller, not per session
    tracing: Tracing | None = None  # the gateway's traces, when on (telemetry/tracing.py)
    destructive: DestructiveTools = attrs.field(factory=DestructiveTools)  # approve_destructive's look-up
    # the client headers some backend's forward_headers names (lower-case): what a frontend keeps of a
    # request for its calls (protocol/on_behalf.py); nothing else of a client's headers goes further
    forward_headers: frozenset[str] = frozenset()
    output: OutputGate = attrs.field(factory=OutputGate)  # max_output_chars in force (session/results.py)
    discovery: SearchIndexes | None = (
        None  # [discovery]: search mode's settings and index (actors/discovery/)
    )
    route: RouteState | None = None  # the session's route, when its path has one

    @property
    def search(self) -> SearchIndexes | None:
        """Search mode's settings and index in force: the route's (a reload's too), else [discovery]'s."""
        route = self.route
        return route.search if route is not None else self.discovery
