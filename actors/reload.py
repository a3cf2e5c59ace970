"""Reloading a running gateway's config (SIGHUP, `mcp-gateway reload`, `[gateway] watch_config`).

The file is loaded and checked whole first: a bad one is refused with every `file: key: reason` in the log,
and the running config stays. A good one is compared with the running one (config/diff.py) and the
difference applied as supervisor operations, in an order that never mixes two runs of one backend:
1. the backends removed or changed are stopped (each answers its calls in flight with an error naming it,
   and ends its process), all at once;
2. the catalog takes its new shape in one event (one list_changed for clients): the removed leave it, the
   changed start over as STARTING, the naming rule and order are the new ones;
3. the backends added or changed are started.
Every secret reference is read again with the file (config/secret.py): a backend whose secret's value
changed counts as changed, and the redactor is told the new values (the old ones stay known to it).
Unchanged backends and every client session are untouched. Listener settings go to the connections that
come after; what needs a restart is said in the log. Each outcome is also written beside the gateway's pid
file (runtime/control.py), where `mcp-gateway reload` reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio
from loguru import logger

from actors.catalog.catalog import Reconfigured
from actors.config import Config, ConfigError, load_config
from actors.config.diff import ConfigDiff, diff
from actors.config.errors import ConfigProblem
from actors.routes.view import rename_collisions
from actors.runtime.redact import REDACTOR
from actors.supply.pins import pins_of, repinned

if TYPE_CHECKING:
    from actors.gateway import Gateway


CONFIG_SECRETS: Final = "config"  # the redactor's group of the values the config's secrets resolved to


@attrs.frozen
class ReloadOutcome:
    ok: bool
    lines: tuple[str, ...]  # what it did, or every problem of a refused file


async def reload(gateway: Gateway, why: str) -> ReloadOutcome:
    path = gateway.config.path
    logger.info("{}: reloading {}", why, path)
    try:
        new = load_config(path)
    except ConfigError as exc:
        for problem in exc.problems:
            logger.error("reload refused: {}", problem)
        logger.error("reload refused: {} keeps running on its previous config", path)
        return ReloadOutcome(False, tuple(str(problem) for problem in exc.problems))
    routes = gateway.routes
    collisions = rename_collisions(routes.catalog.value, new.routes) if routes is not None else []
    if collisions:  # a route's rename onto a name the catalog has now: a load error, as the file is known
        problems = [ConfigProblem(str(path), key, reason) for key, reason in collisions]
        for problem in problems:
            logger.error("reload refused: {}", problem)
        logger.error("reload refused: {} keeps running on its previous config", path)
        return ReloadOutcome(False, tuple(str(problem) for problem in problems))
    REDACTOR.know(CONFIG_SECRETS, new.secret_values())  # read anew: the old values stay known (retired)
    pins = pins_of(new)  # the lock beside it (actors/supply/): re-prepared backends restart too
    change, gateway.pins = repinned(diff(gateway.config, new), gateway.pins, pins), pins
    for what in change.needs_restart:
        logger.warning("reload: {} changed; that takes a restart of the gateway", what)
    if change.nothing:
        logger.info("reload: nothing to change")
        return ReloadOutcome(True, ("nothing to change", *_restart_lines(change)))
    await apply(gateway, new, change)
    logger.info("reloaded {}: {}", path, change.summary())
    return ReloadOutcome(True, (change.summary(), *_restart_lines(change)))


async def apply(gateway: Gateway, new: Config, change: ConfigDiff) -> None:
    children = gateway.children
    assert children is not None and gateway.catalog_events is not None
    async with trio.open_nursery() as stopping:
        for name in (*change.removed, *change.changed):
            stopping.start_soon(children.stop, name)
    gateway.config = new
    gateway.policy.swap(new.policy)  # whole: the next request is judged by the new rules alone
    gateway.limiter.reconfigure(new.limits)
    gateway.output.swap(new.output_limits())  # max_output_chars: from the next call on
    gateway.limit_budgets()  # sessions share one ledger: a stdio-only gateway has no listener to rebuild
    fresh = frozenset((*change.added, *change.changed))
    await gateway.catalog_events.send(
        Reconfigured(
            order=tuple(b.name for b in new.backends),
            request_timeouts_s={b.name: new.request_timeout_s(b) for b in new.backends},
            policies={b.name: b.tools for b in new.backends},
            rule=new.gateway.tool_names,
            expose_stderr=new.gateway.expose_backend_stderr,
            fresh=fresh,
            trust_modes=new.trust_modes(),
        )
    )
    for spec in gateway.backend_specs(name for name in (b.name for b in new.backends) if name in fresh):
        children.start(spec)
    for listener in gateway.listeners:
        settings = listener.settings_in(new)
        if settings is not None and (listener.TABLE in change.listeners or change.sessions_changed):
            listener.reconfigure(settings, gateway.session_settings(listener.TABLE))
    if gateway.routes is not None:  # [[routes]]: a changed route's sessions are told list_changed, alone
        gateway.routes.reconfigure(new.routes)


def _restart_lines(change: ConfigDiff) -> tuple[str, ...]:
    return tuple(f"{what} changed; that takes a restart of the gateway" for what in change.needs_restart)
