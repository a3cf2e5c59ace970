"""What a reload changes: two loaded configs compared, as the supervisor operations that take the running
gateway from one to the other.

A backend is compared by everything its actor is built from, not only its own table: a new gateway-wide
request timeout changes every backend that has none of its own, a new listener can change a backend's
roots default. A new tool policy restarts its backend too: the catalog keeps only the filtered list.
Listener settings apply to the connections that come after; what a running listener cannot change (its
address) and what is built once at start (middleware, audit, the admin listener) is reported as needing a
restart. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import attrs

from actors.config.backend_schema import BackendConfig
from actors.config.listener_schema import HttpSettings, WebSocketSettings
from actors.config.schema import Config


@attrs.frozen(kw_only=True)
class ConfigDiff:
    added: tuple[str, ...] = ()  # backends to start
    removed: tuple[str, ...] = ()  # backends to stop (their calls in flight answered)
    changed: tuple[str, ...] = ()  # backends to stop and start again with their new settings
    unchanged: tuple[str, ...] = ()  # backends left running, untouched
    reordered: bool = False  # the backends' order (which the naming rule reads) is new
    catalog_changed: bool = False  # the naming rule, expose_backend_stderr or [trust] mode is new
    listeners: tuple[str, ...] = ()  # listener tables whose settings changed (new connections get them)
    sessions_changed: bool = False  # what new sessions are built with ([gateway] keys) is new
    # "[policy]", "[limits]", "max_output_chars": in force for every session's next request
    guards_changed: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()  # what a reload does not apply, each said in a few words

    @property
    def nothing(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.reordered
            or self.catalog_changed
            or self.listeners
            or self.sessions_changed
            or self.guards_changed
        )

    def summary(self) -> str:
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (("added", self.added), ("removed", self.removed), ("restarted", self.changed))
            if names
        ]
        if self.listeners:
            parts.append(f"new settings for [{'], ['.join(self.listeners)}]")
        if self.catalog_changed or self.reordered:
            parts.append("catalog rules")
        if self.sessions_changed:
            parts.append("[gateway] settings for new sessions")
        if self.guards_changed:
            parts.append(f"new {' and '.join(self.guards_changed)}")
        parts.append(f"{len(self.unchanged)} backend{'' if len(self.unchanged) == 1 else 's'} untouched")
        return "; ".join(parts)


def backend_inputs(config: Config, backend: BackendConfig) -> tuple[Any, ...]:
    """Everything a backend's actor is built from (gateway.py `_backend`)."""
    gateway = config.gateway
    return (
        attrs.evolve(backend, tools=attrs.evolve(backend.tools, max_output_chars={})),  # sessions apply it
        config.request_timeout_s(backend),
        config.startup_timeout_s(backend),
        gateway.name,
        gateway.shutdown_s,
        gateway.max_message_bytes,
        gateway.expose_backend_stderr,
        config.secret_variables(),
        config.roots_of(backend),
        config.sandbox_rules(backend),  # [sandbox] changed: its stdio backends restart under the new rules
    )


def diff(old: Config, new: Config) -> ConfigDiff:
    before = {b.name: b for b in old.backends}
    after = {b.name: b for b in new.backends}
    added = tuple(name for name in after if name not in before)
    removed = tuple(name for name in before if name not in after)
    kept = [name for name in after if name in before]
    changed = tuple(n for n in kept if backend_inputs(old, before[n]) != backend_inputs(new, after[n]))
    unchanged = tuple(name for name in kept if name not in changed)
    order_before = [name for name in before if name in after]
    catalog_changed = (
        old.gateway.tool_names != new.gateway.tool_names
        or old.gateway.expose_backend_stderr != new.gateway.expose_backend_stderr
        or old.trust.mode != new.trust.mode
    )
    listeners, needs_restart = [], []
    for table in ("websocket", "http"):
        was, now = getattr(old, table), getattr(new, table)
        if (was is None and now is None) or was == now:
            continue
        if was is None or now is None:
            needs_restart.append(f"[{table}] {'added' if was is None else 'removed'}")
        elif (was.host, was.port) != (now.host, now.port):
            needs_restart.append(f"[{table}] host or port")
        else:
            if _key_sources(was) != _key_sources(now):  # each issuer's keeper runs from the start
                needs_restart.append(f"[[{table}.auth.issuers]] issuers or where their keys come from")
            listeners.append(table)
    if old.gateway.block_secrets != new.gateway.block_secrets:
        needs_restart.append("[gateway] block_secrets")
    if old.stdio != new.stdio:
        needs_restart.append("[stdio]")
    if old.middleware != new.middleware:
        needs_restart.append("[[middleware]]")
    if old.audit != new.audit:
        needs_restart.append("[audit]")
    if old.admin != new.admin:
        needs_restart.append("[admin]")
    if old.fleet != new.fleet:
        needs_restart.append("[fleet]")
    if old.tracing != new.tracing:
        needs_restart.append("[tracing]")
    if old.discovery != new.discovery:
        needs_restart.append("[discovery]")
    if old.trust.path != new.trust.path:
        needs_restart.append("[trust] path")
    return ConfigDiff(
        added=added,
        removed=removed,
        changed=changed,
        unchanged=unchanged,
        reordered=order_before != kept,
        catalog_changed=catalog_changed,
        listeners=tuple(listeners),
        sessions_changed=old.gateway != new.gateway,
        guards_changed=tuple(
            f"[{table}]" for table in ("policy", "limits") if getattr(old, table) != getattr(new, table)
        )
        + (("max_output_chars",) if old.output_limits() != new.output_limits() else ())
        + (("[[routes]]",) if old.routes != new.routes else ()),
        needs_restart=tuple(needs_restart),
    )


def _key_sources(listener: WebSocketSettings | HttpSettings) -> tuple[tuple[object, ...], ...]:
    """Each trusted issuer and where and how often its keys are fetched."""
    issuers = listener.oauth.issuers if listener.oauth is not None else ()
    return tuple(
        (i.issuer, i.jwks_url, i.jwks_file, i.refresh_min_s, i.refresh_max_s, i.kid_cooldown_s)
        for i in issuers
    )
