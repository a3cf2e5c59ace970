"""The gateway: the root of the actor tree.

    gateway (root nursery: config, catalog, shutdown)
    ├── catalog
    ├── backends supervisor (one_for_one) ── one Backend per [[backends]] entry
    └── frontends ── the stdio session (WebSocket and HTTP listeners come later)

Shutdown (SIGINT, SIGTERM, or the stdio client closing its stream): sessions stop reading and answer what is
in flight, then the root is cancelled and each backend stops its process (stdin closed, SIGTERM, SIGKILL to
its process group) within its share of `shutdown_s`. A second signal cancels at once.
"""

from __future__ import annotations

import signal
from typing import Final

import attrs
import trio
from loguru import logger

from actors.backend import Backend
from actors.catalog import Catalog, CatalogEvent, CatalogView
from actors.config import BackendConfig, Config
from actors.dispatch import SessionSettings
from actors.session import Session
from actors.supervisor import ChildSpec, Restart, RestartPolicy, supervise
from actors.transports.stdio import open_stdio_transport
from actors.watch import Watch

CATALOG_INBOX_SIZE: Final = 64  # backend facts queued before backends wait for the catalog
SETTLE_MARGIN_S: Final = 2.0  # spawn time on top of startup_timeout_s before initialize stops waiting
SESSIONS_SHARE: Final = 0.4  # of shutdown_s, for sessions to answer and flush before backends are stopped


def restart_policy(backend: BackendConfig) -> RestartPolicy:
    r = backend.restart
    return RestartPolicy(
        restart=Restart(r.policy),
        max_restarts=r.max_restarts,
        window_s=r.window_s,
        backoff_initial_s=r.backoff_initial_s,
        backoff_max_s=r.backoff_max_s,
        stable_after_s=r.stable_after_s,
    )


@attrs.define
class Gateway:
    config: Config
    _stopping: trio.Event = attrs.field(factory=trio.Event)
    _sessions: set[Session] = attrs.field(factory=set)

    def stop(self) -> None:
        self._stopping.set()

    async def run(
        self,
        *,
        stdio: bool = False,
        task_status: trio.TaskStatus[Watch[CatalogView]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until stop() or a signal; `started()` hands back the catalog Watch."""
        config, settings = self.config, self.config.gateway
        events, inbox = trio.open_memory_channel[CatalogEvent](CATALOG_INBOX_SIZE)
        catalog = Catalog(
            [b.name for b in config.backends],
            {b.name: config.request_timeout_s(b) for b in config.backends},
            settings.tool_names,
            inbox,
        )
        async with trio.open_nursery() as root:
            root.start_soon(self._watch_signals, root.cancel_scope)
            await root.start(catalog.run)
            with events:
                specs = [
                    ChildSpec(b.name, self._backend(b, events.clone()).run, restart_policy(b), kind="backend")
                    for b in config.backends
                ]
                await root.start(supervise, specs, events.clone())
            if stdio:
                root.start_soon(self._serve_stdio, catalog.watch)
            task_status.started(catalog.watch)
            await self._stopping.wait()
            await self._stop_sessions()
            root.cancel_scope.cancel()
        logger.info("gateway stopped")

    def _backend(self, backend: BackendConfig, events: trio.MemorySendChannel[CatalogEvent]) -> Backend:
        settings = self.config.gateway
        return Backend(
            backend,
            events,
            settings.name,
            self.config.startup_timeout_s(backend),
            settings.shutdown_s,
            settings.max_message_bytes,
        )

    def _session_settings(self) -> SessionSettings:
        longest_start = max(self.config.startup_timeout_s(b) for b in self.config.backends)
        return SessionSettings(
            self.config.gateway.name, longest_start + SETTLE_MARGIN_S, self.config.gateway.shutdown_s
        )

    async def _serve_stdio(self, catalog: Watch[CatalogView]) -> None:
        session = Session(
            "stdio",
            open_stdio_transport(self.config.gateway.max_message_bytes),
            catalog,
            self._session_settings(),
        )
        self._sessions.add(session)
        try:
            await session.run()
        except Exception:  # a session is a temporary child: it dies alone, logged, never restarted
            logger.opt(exception=True).error("session stdio crashed")
        finally:
            self._sessions.discard(session)
        logger.info("stdio client is gone; stopping")
        self.stop()

    async def _stop_sessions(self) -> None:
        for session in list(self._sessions):
            session.stop()
        with trio.move_on_after(self.config.gateway.shutdown_s * SESSIONS_SHARE):
            for session in list(self._sessions):
                await session.done.wait()

    async def _watch_signals(self, root: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if self._stopping.is_set():
                    logger.warning("{} again: stopping now", name)
                    root.cancel()
                    return
                logger.info("{}: shutting down (at most {}s)", name, self.config.gateway.shutdown_s)
                self.stop()
