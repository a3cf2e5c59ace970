"""The replica's fleet parts, built from [fleet] and run under the gateway's root nursery."""

from __future__ import annotations

from typing import Any, Final

import attrs
import trio

from actors.backends.list_news import ListNews
from actors.config.fleet_schema import FleetSettings
from actors.fleet.ask_ids import AskIdSeal
from actors.fleet.limits import FleetLimits
from actors.fleet.relay import FleetRelay
from actors.fleet.seal import FleetSeal
from actors.fleet.session_ids import SessionIds
from actors.fleet.sessions import FleetSessions
from actors.fleet.states import FleetStates
from actors.fleet.store import FleetStore
from actors.limits import Limiter
from actors.protocol.envelopes import BackendEvent
from actors.runtime.broadcast import Broadcast
from actors.runtime.supervisor import ChildSpec, Restart, RestartPolicy, supervise_alone

# A part of the fleet that fails is restarted with backoff, and given up (logged as failed) only when it
# keeps failing: more than max_restarts within window_s.
USER_POLICY: Final = RestartPolicy(
    restart=Restart.PERMANENT, max_restarts=20, window_s=600.0, backoff_initial_s=0.5, backoff_max_s=30.0
)


@attrs.define(eq=False, kw_only=True)
class Fleet:
    """Owns: the Redis link (`store`), the fleet's sessions (`sessions`), messages (`relay`) and limits.
    Stops when: the gateway's root is cancelled."""

    settings: FleetSettings
    store: FleetStore
    sessions: FleetSessions
    relay: FleetRelay
    limits: FleetLimits
    states: FleetStates

    @classmethod
    def of(
        cls,
        settings: FleetSettings,
        events: Broadcast[BackendEvent],
        limiter: Limiter,
        list_news: ListNews | None = None,
    ) -> Fleet:
        store = FleetStore(settings=settings)
        seal = FleetSeal.of(settings.keys)
        ids, asks = SessionIds(seal, settings.replica), AskIdSeal(seal, settings.replica)
        sessions = FleetSessions(settings=settings, ids=ids, store=store, asks=asks)
        relay = FleetRelay(
            settings=settings,
            store=store,
            events=events,
            on_ended=sessions.ended_elsewhere,
            on_told=sessions.told_elsewhere,
        )
        sessions.announce_end, sessions.announce_told = relay.publish_ended, relay.publish_told
        if list_news is not None:  # the backends' list changes, both ways, and caught up after Redis was away
            list_news.announced, relay.on_list_changed = relay.publish_list_changed, list_news.elsewhere
            relay.on_rejoined = list_news.check_all
            store.on_back.append(relay.catch_up)
        limits = FleetLimits(settings=settings, store=store, limiter=limiter)
        states = FleetStates(settings=settings, store=store)
        return cls(
            settings=settings, store=store, sessions=sessions, relay=relay, limits=limits, states=states
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.store.run(self._users, task_status=task_status)

    async def _users(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """What uses the Redis link, started inside it (so each ends before the link closes), in order, each
        under a supervisor of its own: one that fails is logged and restarted alone, as a backend is; the
        gateway and its other parts go on (the replica serves with the rest meanwhile)."""
        async with trio.open_nursery() as nursery:
            for name, run in (
                ("relay", self.relay.run),
                ("limits", self.limits.run),
                ("states", self.states.run),
            ):  # each started (or failed at its start, and restarting) before the next
                await nursery.start(supervise_alone, ChildSpec(name, run, USER_POLICY, kind="fleet"))
            task_status.started()

    def status(self) -> dict[str, Any]:
        """For /status and /readyz: this replica, and whether it shares state or serves alone."""
        if self.store.available:
            return {"replica": self.settings.replica, "redis": "available", "serving": "fleet"}
        return {
            "replica": self.settings.replica,
            "redis": "unavailable",
            "serving": "alone",
            "reason": self.store.reason,
        }
