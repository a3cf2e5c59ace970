"""The backends supervisor's children, made from the config: one Backend actor per [[backends]] entry, with
its restart policy, and everything of the gateway's it shares (events, clients, meters, the shutdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from actors.backends.actor import Backend
from actors.backends.credentials import Credentials
from actors.backends.token_broker import AuditSink, TokenBroker
from actors.catalog import CatalogEvent
from actors.config import BackendConfig
from actors.config.auth_schema import TokenEndpointAuth
from actors.config.backend_schema import RemoteBackend
from actors.middleware.audit import AuditMiddleware
from actors.runtime.supervisor import Restart, RestartPolicy

if TYPE_CHECKING:
    from actors.gateway import Gateway


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


def backend_actor(
    gateway: Gateway, backend: BackendConfig, events: trio.MemorySendChannel[CatalogEvent]
) -> Backend:
    config, settings = gateway.config, gateway.config.gateway
    return Backend(
        config=backend,
        catalog=events,
        gateway_name=settings.name,
        startup_timeout_s=config.startup_timeout_s(backend),
        shutdown_s=settings.shutdown_s,
        max_message_bytes=settings.max_message_bytes,
        request_timeout_s=config.request_timeout_s(backend),
        events=gateway.events,
        clients=gateway.clients,
        subscriptions=gateway.subscriptions,
        withheld_env=config.secret_variables(),
        roots=config.roots_of(backend),
        meter=gateway.meters.backend(backend.name),
        expose_stderr=settings.expose_backend_stderr,
        shutdown=gateway.shutdown,  # its budget and urgency stop the backend's process
        list_news=gateway.list_news,
        credentials=credentials_of(backend, token_audit(gateway)),
        sandbox=config.sandbox_of(backend),
    )


def credentials_of(backend: BackendConfig, audit: AuditSink | None) -> Credentials | None:
    """A remote backend's Credentials, with a token broker when its auth gets tokens; None when it has no
    auth and forwards no header (its `headers` alone, as before)."""
    if not isinstance(backend, RemoteBackend) or (backend.auth is None and not backend.forward_headers):
        return None
    auth = backend.auth
    broker = (
        TokenBroker(backend=backend.name, auth=auth, audit=audit)
        if isinstance(auth, TokenEndpointAuth)
        else None
    )
    return Credentials.of(backend, broker)


def token_audit(gateway: Gateway) -> AuditSink | None:
    """Where token brokers write their rows: the [audit]'s second table, when there is an [audit]."""
    audit = next((m for m in gateway.middleware if isinstance(m, AuditMiddleware)), None)
    return audit.token_requested if audit is not None else None
