"""The admin as one child of the gateway's root: its listener under a supervisor of its own, the state
history and the rate sampler beside it.

    gateway root
    └── admin (this)
        ├── state history   follows the catalog's views
        ├── rate sampler    reads the meters once a second
        └── admin supervisor (one_for_one) ── admin listener (permanent, restarted with backoff)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
import trio

from actors.admin.app import AdminApp
from actors.admin.exposition import make_registry
from actors.admin.history import StateHistory
from actors.admin.listener import AdminListener
from actors.admin.rates import RateSampler
from actors.admin.status import FrontendInfo, StatusModel
from actors.admin.trust_routes import TrustRoutes
from actors.catalog import CatalogView
from actors.catalog.trust_keeper import TrustKeeper
from actors.config import Config
from actors.config.admin_schema import AdminSettings
from actors.runtime.supervisor import (
    ChildEvent,
    ChildSpec,
    Restart,
    RestartPolicy,
    discard_reports,
    supervise,
)
from actors.runtime.watch import Watch
from actors.telemetry.meters import Meters

# As the other listeners': restarted on the sockets it holds; past the intensity it stays down (logged) and
# the gateway goes on without it.
ADMIN_POLICY: Final = RestartPolicy(Restart.PERMANENT, max_restarts=5, window_s=60.0, backoff_max_s=30.0)


@attrs.define(kw_only=True)
class Admin:
    """Owns: the admin listener, the state history, the rate sampler, and the supervisor of the listener.
    Receives: catalog views (the history); reads the meters (the sampler) and the frontends' sessions.
    Sends: nothing to other actors; answers HTTP requests.
    Stops when: cancelled with the gateway's root.
    Errors: ListenError from `bind`; after that, a failing listener run is restarted alone.
    """

    settings: AdminSettings
    catalog: Watch[CatalogView]
    history: StateHistory
    sampler: RateSampler
    listener: AdminListener

    @classmethod
    def of(
        cls,
        config: Config,
        settings: AdminSettings,
        meters: Meters,
        catalog: Watch[CatalogView],
        frontends: Callable[[], Sequence[FrontendInfo]],
        trust: TrustKeeper | None = None,
    ) -> Admin:
        changed = Watch(0.0)
        history = StateHistory(changed)
        sampler = RateSampler(meters, changed)
        model = StatusModel(
            name=config.gateway.name,
            config_path=str(config.path),
            catalog=catalog,
            meters=meters,
            history=history,
            frontends=frontends,
            required=frozenset(backend.name for backend in config.backends if backend.required),
            started_at=trio.current_time(),
        )
        app = AdminApp(
            model=model,
            sampler=sampler,
            changed=changed,
            registry=make_registry(model),
            token=settings.token,
            loopback=settings.loopback,
            trust=TrustRoutes(catalog=catalog, keeper=trust),
        )
        listener = AdminListener(settings, app)
        return cls(settings=settings, catalog=catalog, history=history, sampler=sampler, listener=listener)

    @property
    def url(self) -> str:
        return self.listener.url

    def report_fleet(self, status: Callable[[], dict[str, Any]]) -> None:
        """[fleet]: /status and /readyz say which replica this is and whether it serves alone."""
        self.listener.app.model.fleet = status

    async def bind(self) -> None:
        await self.listener.bind()

    def close(self) -> None:
        self.listener.close()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        events, reports = trio.open_memory_channel[ChildEvent](0)
        spec = ChildSpec("admin", self.listener.run, ADMIN_POLICY, kind="child")
        async with trio.open_nursery() as nursery:
            await nursery.start(self.history.run, self.catalog)
            await nursery.start(self.sampler.run)
            nursery.start_soon(discard_reports, reports)
            await nursery.start(supervise, [spec], events)
            task_status.started()
