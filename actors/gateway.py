"""The gateway: the root of the actor tree.

    gateway (root nursery: config, catalog, shutdown, reload)
    ├── catalog
    ├── frontends supervisor (one_for_one) ── the WebSocket and Streamable HTTP listeners (permanent), the
    │       stdio session (temporary); every connection a contained task in the frontends' nursery
    └── backends supervisor (one_for_one, children added and stopped by a reload: runtime/children.py) ──
            one Backend per [[backends]] entry

Start-up binds every listener before any backend starts: a port in use is one line and exit 2, not a
gateway that started its backends and then died.

Shutdown is a state the root owns (runtime/shutdown.py), begun by SIGINT or SIGTERM (a budget of
`shutdown_s`) or by the stdio client closing its input (STDIN_END_SHARE of it: 1.25 s by default, before the
SDKs' clients send SIGTERM, 2 s after). Sessions stop reading and answer what is in flight, then the root is
cancelled and each backend stops its process (stdin closed, SIGTERM, SIGKILL to its process group and every
descendant it is known to have) within its share of the budget. The signal handlers stay installed until
every backend has stopped: a signal during the shutdown hurries it (no more polite waits: SIGTERM now),
another forces it (SIGKILL now); none ever kills the gateway while its backends run. The listeners' ports are
given back however the run ends.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from loguru import logger

from actors.backend_actors import backend_actor, restart_policy
from actors.backends.list_news import ListNews
from actors.catalog import Catalog, CatalogEvent, CatalogView
from actors.catalog.clients import ClientDirectory
from actors.catalog.subscriptions import Subscriptions, unsubscribe_at
from actors.catalog.trust_keeper import TrustKeeper
from actors.config import Config
from actors.discovery.indexes import SearchIndexes, keep_index
from actors.frontends.listener import Listener
from actors.frontends.listening import ListenError
from actors.frontends.routing import bound
from actors.frontends.stdio import open_stdio_transport, stdin_is_a_file, stdio_principal, stdio_settings
from actors.limits import Limiter
from actors.middleware import Middleware
from actors.middleware.loading import build_middleware
from actors.output.settings import OutputGate
from actors.policy import PolicyGate, caller_of
from actors.protocol.envelopes import BackendEvent
from actors.protocol.errors import GatewayStartError
from actors.reload import CONFIG_SECRETS, ReloadOutcome
from actors.reload import reload as reload_config
from actors.routes import Routes
from actors.runtime.broadcast import Broadcast
from actors.runtime.children import Children
from actors.runtime.control import ControlFiles
from actors.runtime.file_watch import watch_file
from actors.runtime.redact import REDACTOR
from actors.runtime.shutdown import Budget, Shutdown, Urgency
from actors.runtime.signals import watch_signals
from actors.runtime.supervisor import (
    ChildEvent,
    ChildSpec,
    Restart,
    RestartPolicy,
    discard_reports,
    supervise,
    supervise_alone,
)
from actors.runtime.watch import Watch
from actors.session import discovery_calls
from actors.session.parked import Bridges
from actors.session.session import Session
from actors.session.settings import FirstSettle, SessionSettings
from actors.supply import LockEntry
from actors.supply.pins import pins_of
from actors.telemetry.meters import Meters
from actors.telemetry.tracing_switch import open_tracing, tracing_wanted
from actors.trust import TrustMode
from actors.trust.sqlite_store import SqliteTrustStore
from actors.trust.store import TrustStore, TrustStoreUnavailableError

if TYPE_CHECKING:
    from actors.telemetry.tracing import Tracing

CATALOG_INBOX_SIZE: Final = 64  # backend facts queued before backends wait for the catalog
SETTLE_MARGIN_S: Final = 2.0  # `tools` waits this long on top of the longest startup_timeout_s
# Of shutdown_s, for a shutdown begun by the stdio client closing its input: every SDK client sends SIGTERM
# 2 s after that, and the gateway's backends are gone well before (1.25 s with the default shutdown_s = 5).
STDIN_END_SHARE: Final = 0.25
# A listener whose accept loop fails is restarted on the sockets it holds; past the intensity it stays down
# (logged) while the other frontends, the sessions and the backends go on.
LISTENER_POLICY: Final = RestartPolicy(Restart.PERMANENT, max_restarts=5, window_s=60.0, backoff_max_s=30.0)
# A middleware's run (the audit's writer) is never left down: calls wait on a full audit queue, so a writer
# that stayed down would hold every call. It is restarted after each fault, at most every 30 s.
MIDDLEWARE_POLICY: Final = RestartPolicy(Restart.PERMANENT, max_restarts=2**62, backoff_max_s=30.0)
STDIO_POLICY: Final = RestartPolicy(Restart.TEMPORARY)  # its client is gone: nobody to restart it for
if TYPE_CHECKING:
    from actors.admin.service import Admin
    from actors.admin.status import FrontendInfo
    from actors.fleet.fleet import Fleet
    from actors.frontends.http.listener import HttpListener
    from actors.frontends.websocket import WebSocketListener

# Every kind of network listener, by its config table, in the order they start and are named in the log; a
# new kind is a new Listener module and an entry here. Each is imported only when its table is in the config
# (trio-websocket, hypercorn), as the admin listener is (prometheus-client): an editor's stdio gateway starts
# without them.
LISTENER_KINDS: Final = (
    ("websocket", "actors.frontends.websocket", "WebSocketListener"),
    ("http", "actors.frontends.http.listener", "HttpListener"),
)


def listener_kinds(config: Config) -> list[type[Listener[Any]]]:
    """The Listener classes of the tables `config` has, in LISTENER_KINDS' order."""
    return [
        getattr(importlib.import_module(module), name)
        for table, module, name in LISTENER_KINDS
        if getattr(config, table) is not None
    ]


@attrs.define
class Gateway:
    config: Config
    shutdown: Shutdown = attrs.field(factory=Shutdown)  # its state, budget and urgency, read by every backend
    _backends_stopped: trio.Event = attrs.field(factory=trio.Event)
    _sessions: set[Session] = attrs.field(factory=set)
    listeners: list[Listener[Any]] = attrs.field(init=False, factory=list)  # the configured ones, once bound
    events: Broadcast[BackendEvent] = attrs.field(factory=Broadcast)
    list_news: ListNews = attrs.field(factory=ListNews)  # backends' list changes, to and from the fleet
    clients: ClientDirectory = attrs.field(factory=ClientDirectory)
    subscriptions: Subscriptions = attrs.field(factory=Subscriptions)
    bridges: Bridges = attrs.field(factory=Bridges)  # modern calls parked on legacy backends' asks
    first_settle: FirstSettle = attrs.field(factory=FirstSettle)
    control: ControlFiles | None = None  # where `mcp-gateway reload` finds this gateway (serve only)
    children: Children | None = None  # the backends supervisor, once running
    catalog_events: trio.MemorySendChannel[CatalogEvent] | None = None  # the catalog's inbox, for a reload
    _reloading: trio.Lock = attrs.field(factory=trio.Lock)
    middleware: tuple[Middleware, ...] = attrs.field(init=False)
    policy: PolicyGate = attrs.field(init=False)  # the [policy] in force; a reload swaps its rules
    limiter: Limiter = attrs.field(init=False)  # the [limits]; a reload reconfigures it
    output: OutputGate = attrs.field(init=False)  # max_output_chars in force; a reload swaps them
    discovery: SearchIndexes | None = attrs.field(init=False, default=None)  # [discovery]: closed at the end
    routes: Routes | None = attrs.field(
        init=False, default=None
    )  # [[routes]]: their views; closed at the end
    meters: Meters = attrs.field(factory=Meters)  # calls, latency, bytes, starts: for the admin listener
    admin: Admin | None = attrs.field(init=False, default=None)  # with an [admin] table, once bound
    fleet: Fleet | None = attrs.field(init=False, default=None)  # [fleet]: Redis, shared sessions
    trust: TrustKeeper | None = attrs.field(
        init=False, default=None
    )  # the trust store's keeper, once started
    exit_code: int = 0  # 1 once the stdio session crashed: an editor must not read a crash as a clean exit
    traced: bool = attrs.field(init=False, default=False)  # [tracing] or OTEL_EXPORTER_OTLP_*ENDPOINT
    tracing: Tracing | None = attrs.field(init=False, default=None)  # while it runs, when traced
    pins: dict[str, LockEntry] = attrs.field(init=False, factory=dict)  # the lock's, as last loaded

    def __attrs_post_init__(self) -> None:
        REDACTOR.know(CONFIG_SECRETS, self.config.secret_values())  # before anything can log or show one
        self.middleware = build_middleware(self.config)  # ConfigError when a factory fails
        self.policy = PolicyGate(self.config.policy)
        self.limiter = Limiter(self.config.limits)
        self.output = OutputGate(self.config.output_limits())
        discovery = self.config.discovery
        self.discovery = (
            SearchIndexes(discovery) if discovery is not None and discovery.mode != "direct" else None
        )
        self.meters.policy, self.meters.limiter = self.policy, self.limiter  # for /metrics
        self.traced = tracing_wanted(self.config.tracing)
        self.pins = pins_of(self.config)  # a reload restarts the backends whose pins changed

    def stop(self, reason: str = "stopped") -> None:
        """Begin the shutdown (with the whole `shutdown_s`), unless it has begun."""
        self.shutdown.begin(reason, Budget.of(self.config.gateway.shutdown_s))

    def stdin_end_budget(self) -> Budget:
        return Budget.of(self.config.gateway.shutdown_s * STDIN_END_SHARE)

    @property
    def listener(self) -> WebSocketListener | None:
        return self._listener_of("websocket")  # type: ignore[return-value]

    @property
    def http_listener(self) -> HttpListener | None:
        return self._listener_of("http")  # type: ignore[return-value]

    @property
    def websocket_url(self) -> str | None:
        return self.listener.url if self.listener is not None else None

    @property
    def http_url(self) -> str | None:
        return self.http_listener.url if self.http_listener is not None else None

    async def run(
        self,
        *,
        stdio: bool = False,
        websocket: bool = True,
        task_status: trio.TaskStatus[Watch[CatalogView]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until stop() or a signal; `started()` hands back the catalog Watch once the backends are
        starting and, with `websocket` (network listeners on), the [websocket] and [http] listeners are
        bound."""
        config, settings = self.config, self.config.gateway
        events, inbox = trio.open_memory_channel[CatalogEvent](CATALOG_INBOX_SIZE)
        catalog = Catalog(
            order=[b.name for b in config.backends],
            request_timeouts_s={b.name: config.request_timeout_s(b) for b in config.backends},
            rule=settings.tool_names,
            inbox=inbox,
            policies={b.name: b.tools for b in config.backends},
            expose_stderr=settings.expose_backend_stderr,
            trust_modes=config.trust_modes(),
        )
        self.tracing = open_tracing(config) if self.traced else None  # ended (flushed) with the run
        if self.tracing is not None:  # its duration histograms on /metrics too
            self.meters.durations = (self.tracing.server_durations, self.tracing.client_durations)
        try:
            async with trio.open_nursery() as root:
                hangup = partial(root.start_soon, self.reload, "SIGHUP")
                signals = await root.start(watch_signals, self.shutdown, settings.shutdown_s, hangup)
                try:
                    await self._start(root, catalog, events, stdio=stdio, websocket=websocket)
                    task_status.started(catalog.watch)
                    await self.shutdown.wait_begun()
                    await self._stop_sessions()
                finally:
                    root.cancel_scope.cancel()  # every backend stops its process, within the budget
                    if self.children is not None:
                        with trio.CancelScope(shield=True):
                            await self._backends_stopped.wait()
                    signals.cancel()  # only now: a signal until here hurries the shutdown
        finally:
            for listener in self.listeners:
                listener.endpoint.close()  # the ports go back, bound or not, whatever ended the run
            if self.admin is not None:
                self.admin.close()
            if self.discovery is not None:
                self.discovery.close()
            if self.routes is not None:
                self.routes.close()
            await self._end_tracing()
        logger.info("gateway stopped")

    async def _end_tracing(self) -> None:
        """The spans still queued are exported (within shutdown_s), and the export threads stop."""
        tracing, self.tracing = self.tracing, None
        if tracing is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(tracing.shutdown, self.config.gateway.shutdown_s)

    async def _start(
        self,
        root: trio.Nursery,
        catalog: Catalog,
        events: trio.MemorySendChannel[CatalogEvent],
        *,
        stdio: bool,
        websocket: bool,
    ) -> None:
        """The tree under the root: catalog, middleware, listeners bound, frontends, admin, backends."""
        config = self.config
        self.bridges.nursery = root  # the timers of parked calls
        await root.start(catalog.run)
        root.start_soon(self.subscriptions.send_released, partial(unsubscribe_at, catalog.watch))
        if self.discovery is not None:  # [discovery]: each catalog version's search index, built off the loop
            root.start_soon(keep_index, catalog.watch, discovery_calls.catalog_reading, self.discovery)
        for middleware in self.middleware:
            await middleware.open()  # GatewayStartError: nothing has started yet
            spec = ChildSpec(type(middleware).__name__, middleware.run, MIDDLEWARE_POLICY, kind="middleware")
            await root.start(supervise_alone, spec)
        if config.fleet is not None:
            from actors.fleet.fleet import Fleet  # imports coredis: only with a [fleet] table

            self.fleet = Fleet.of(config.fleet, self.events, self.limiter, self.list_news)
            self.bridges.key = self.fleet.states.key  # requestStates any replica opens, naming their owner
            await root.start(self.fleet.run)
        await self._start_trust(root, catalog, events)
        if websocket:
            await self._bind_listeners(catalog.watch)  # ListenError: nothing has started yet
            await self._bind_admin(catalog.watch, stdio)
            if self.admin is not None and self.fleet is not None:
                self.admin.report_fleet(self.fleet.status)
        if websocket or stdio:
            self._log_serving(stdio)
        await root.start(self._frontends, catalog.watch, stdio)
        if self.admin is not None:
            await root.start(self.admin.run)
        with events:
            self.catalog_events = events.clone()
            specs = self.backend_specs(b.name for b in config.backends)
            self.children = await root.start(self._backends, events.clone(), specs)
        if config.gateway.watch_config:
            root.start_soon(watch_file, config.path, partial(self.reload, "the config file changed"))

    async def _start_trust(
        self, root: trio.Nursery, catalog: Catalog, events: trio.MemorySendChannel[CatalogEvent]
    ) -> None:
        """The trust keeper, with the baselines of every backend whose trust is on handed to the catalog
        before any backend starts. An SQLite store that cannot be opened stops the start (as the audit's
        does); Redis that does not answer holds those backends' definitions until it does."""
        store: TrustStore
        if self.fleet is not None:
            from actors.fleet.trust_store import RedisTrustStore  # imports coredis: only with [fleet]

            store = RedisTrustStore(self.fleet.settings, self.fleet.store)
        else:
            assert self.config.trust.path is not None
            store = SqliteTrustStore(self.config.trust.path)
        on_written = self.fleet.relay.publish_trust if self.fleet is not None else None
        keeper = TrustKeeper(
            store=store,
            catalog=events.clone(),  # type: ignore[arg-type]
            on_written=on_written,
            flush_s=self.config.gateway.shutdown_s,
        )
        catalog.trust_writes, catalog.trust_load = keeper.note, keeper.load_later
        if self.fleet is not None:
            self.fleet.relay.on_trust = partial(self._trust_elsewhere, keeper)
            self.fleet.store.on_back.append(keeper.retry)
        trusting = [name for name, mode in self.config.trust_modes().items() if mode is not TrustMode.OFF]
        try:
            await keeper.open(trusting)
        except TrustStoreUnavailableError as exc:
            if self.fleet is None:
                raise GatewayStartError(f"cannot open the trust store: {exc}") from None
        spec = ChildSpec("trust", keeper.run, MIDDLEWARE_POLICY, kind="middleware")
        await root.start(supervise_alone, spec)
        self.trust = keeper

    def _trust_elsewhere(self, keeper: TrustKeeper, backends: list[str]) -> None:
        """Another replica wrote these backends' trust: those this gateway serves are loaded again."""
        served = {backend.name for backend in self.config.backends}
        keeper.load_later([name for name in backends if name in served])

    async def _bind_listeners(self, catalog: Watch[CatalogView]) -> None:
        self.listeners = [
            kind(settings, catalog, self.session_settings(kind.TABLE))
            for kind in listener_kinds(self.config)
            if (settings := kind.settings_in(self.config)) is not None
        ]
        for listener in self.listeners:
            listener.serve_routes(self.routes_of(catalog))
        for listener in self.listeners:
            await listener.endpoint.bind()
        if self.fleet is not None and self.http_listener is not None:
            self.http_listener.join_fleet(self.fleet.sessions, self.fleet.relay, self.fleet.states)
            self.fleet.states.reached_at(self.fleet.settings.advertise_url or self.http_listener.url)

    async def _bind_admin(self, catalog: Watch[CatalogView], stdio: bool) -> None:
        """With an [admin] table, its listener. Serving stdio, a taken admin address is a warning: several
        editors' gateways on one config all serve, and the first holds the admin port."""
        if self.config.admin is None:
            return
        from actors.admin.service import Admin  # prometheus-client and the page: only with [admin]

        admin = Admin.of(self.config, self.config.admin, self.meters, catalog, self.frontends, self.trust)
        try:
            await admin.bind()
        except ListenError as exc:
            if not stdio:
                raise
            logger.warning("{}: serving stdio without the admin listener", exc)
            admin.close()
            return
        self.admin = admin

    def frontends(self) -> list[FrontendInfo]:
        """Each frontend now, with its open sessions (for the admin listener)."""
        from actors.admin.status import FrontendInfo

        stdio = tuple(session.id for session in self._sessions)
        network = [
            FrontendInfo(
                listener.name,
                listener.url,
                tuple(session.id for session in listener.sessions()),
                listener.issuer_keys(),
            )
            for listener in self.listeners
        ]
        return network + ([FrontendInfo("stdio", None, stdio)] if stdio else [])

    def _log_serving(self, stdio: bool) -> None:
        """What is served, said once the ports are held: a port in use is its one error line alone."""
        config = self.config
        on = (("WebSocket", config.websocket), ("Streamable HTTP", config.http), ("stdio", stdio))
        frontends = " and ".join(name for name, present in on if present)
        backends = f"{len(config.backends)} backend{'' if len(config.backends) == 1 else 's'}"
        logger.info("serving MCP over {}: {} from {}", frontends, backends, config.path)

    def backend_specs(self, names: Iterable[str]) -> list[ChildSpec]:
        """The backends supervisor's child specs for these backends of the current config."""
        assert self.catalog_events is not None
        wanted = set(names)
        return [
            ChildSpec(
                b.name, backend_actor(self, b, self.catalog_events.clone()).run, restart_policy(b), "backend"
            )
            for b in self.config.backends
            if b.name in wanted
        ]

    async def reload(self, why: str) -> ReloadOutcome:
        """Load the config file again and apply what changed (reload.py); one reload at a time."""
        async with self._reloading:
            outcome = await reload_config(self, why)
        if self.control is not None:
            self.control.tell(outcome)
        return outcome

    async def _backends(
        self,
        events: trio.MemorySendChannel[CatalogEvent],
        specs: list[ChildSpec],
        *,
        task_status: trio.TaskStatus[Children],
    ) -> None:
        """The backends supervisor; `_backends_stopped` once every backend has stopped its process."""
        try:
            await Children(events).run(specs, task_status=task_status)
        finally:
            self._backends_stopped.set()

    def _listener_of(self, table: str) -> Listener[Any] | None:
        return next((listener for listener in self.listeners if table == listener.TABLE), None)

    async def _frontends(
        self, catalog: Watch[CatalogView], stdio: bool, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """The frontends supervisor. Its nursery holds every connection and network session, so a listener
        run that fails and is restarted takes none of them along."""
        events, reports = trio.open_memory_channel[ChildEvent](0)
        async with trio.open_nursery() as connections:
            specs = [
                ChildSpec(listener.name, partial(listener.run, connections), LISTENER_POLICY, kind="child")
                for listener in self.listeners
            ]
            if stdio:
                specs.append(
                    ChildSpec("stdio", partial(self._serve_stdio, catalog), STDIO_POLICY, kind="child")
                )
            connections.start_soon(discard_reports, reports)
            await connections.start(supervise, specs, events)
            task_status.started()

    def limit_budgets(self) -> None:
        """The config's byte budgets on the ledger every session shares (at start, and on a reload: what is
        held stays held, new requests meet the new budgets)."""
        settings = self.config.gateway
        self.bridges.budget.limit(
            settings.max_request_bytes, settings.max_client_bytes, settings.max_unread_bytes
        )

    def session_settings(self, frontend: str) -> SessionSettings:
        """What a frontend's sessions are built with (`frontend` names whose traffic they count)."""
        settings = self.config.gateway
        self.limit_budgets()
        return SessionSettings(
            server_name=settings.name,
            settle_timeout_s=settings.initialize_hold_s,
            drain_s=settings.shutdown_s,
            page_size=settings.page_size,
            events=self.events,
            clients=self.clients,
            middleware=self.middleware,
            subscriptions=self.subscriptions,
            bridges=self.bridges,
            first_settle=self.first_settle,
            max_inflight=settings.max_inflight_per_session,
            traffic=self.meters.frontend(frontend),
            policy=self.policy,
            limiter=self.limiter,
            tracing=self.tracing,
            forward_headers=self.config.forwarded_headers(),
            output=self.output,
            discovery=self.discovery,
        )

    async def _serve_stdio(
        self, catalog: Watch[CatalogView], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        settings, ends_all = self.session_settings("stdio"), not self.listeners
        if ends_all and not stdin_is_a_file():  # the client that closes stdin quits: its calls in flight
            settings = attrs.evolve(settings, drain_s=self.stdin_end_budget().drain_s)  # get the drain share
        principal = stdio_principal(self.config)  # stdio carries no token: [stdio] names its client
        catalog, settings = bound(self.routes_of(catalog).stdio, catalog, settings)  # [[routes]] stdio = true
        session = Session(
            id="stdio",
            transport=open_stdio_transport(self.config.gateway.max_message_bytes),
            catalog=catalog,
            settings=stdio_settings(principal, self.config, settings),
            subject=principal.subject if principal else None,
            caller=caller_of(principal, "stdio", "stdio"),
        )
        self._sessions.add(session)
        task_status.started()
        try:
            await session.run_temporary()
        finally:
            self._sessions.discard(session)
        if session.crashed:
            self.exit_code = 1
        urls = [listener.url for listener in self.listeners if listener.url]
        if ends_all:
            budget = self.stdin_end_budget()
            if self.shutdown.begin("the stdio client is gone", budget):
                logger.info("stdio client is gone; stopping (at most {:.2f}s)", budget.total_s)
        else:
            logger.info("stdio client is gone; still serving {}", " and ".join(urls))

    def routes_of(self, catalog: Watch[CatalogView]) -> Routes:
        """[[routes]]: every route's state, made once (empty without routes: every path is the catalog)."""
        if self.routes is None:
            self.routes = Routes.of(self.config.routes, catalog, self.config.discovery, self.policy)
        return self.routes

    async def _stop_sessions(self) -> None:
        """Every session answers what it has in flight and closes, within the drain share of the shutdown's
        budget (less, if a signal hurries it)."""
        for session in list(self._sessions):
            session.stop()
        for listener in self.listeners:
            listener.stop_sessions()
        drain_s = self.shutdown.budget_or(Budget.of(self.config.gateway.shutdown_s)).drain_s
        with self.shutdown.phase(drain_s, until=Urgency.HURRIED):
            for session in list(self._sessions):
                await session.done.wait()
            for listener in self.listeners:
                await listener.wait_sessions_done()
