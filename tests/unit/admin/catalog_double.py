"""A real Catalog fed by hand, so the admin's models read real CatalogViews."""

from __future__ import annotations

from typing import Any

import trio

from actors.admin.history import StateHistory
from actors.admin.status import FrontendInfo, StatusModel
from actors.backends.errors import BackendExitedError
from actors.catalog import Catalog, CatalogEvent
from actors.protocol.envelopes import BackendCommand, BackendReady, Call, ReplySlot
from actors.runtime.supervisor import ChildFailed, ChildRestarting
from actors.runtime.watch import Watch
from actors.telemetry.meters import Meters


def make_catalog(*names: str, expose_stderr: bool = False) -> Catalog:
    _, inbox = trio.open_memory_channel[CatalogEvent](1)
    return Catalog(
        order=list(names),
        request_timeouts_s=dict.fromkeys(names, 60.0),
        rule="prefix-on-collision",
        inbox=inbox,
        expose_stderr=expose_stderr,
    )


def tell(catalog: Catalog, event: CatalogEvent) -> None:
    catalog.apply(event)
    catalog.watch.publish(catalog.view())


def ready(name: str, *tools: str) -> BackendReady:
    calls, _ = trio.open_memory_channel[BackendCommand](1)
    listed: tuple[dict[str, Any], ...] = tuple({"name": t, "inputSchema": {"type": "object"}} for t in tools)
    return BackendReady(name, listed, calls)


def restarting(name: str, why: str) -> ChildRestarting:
    return ChildRestarting(name, RuntimeError(why), 0.5)


def crashed(name: str, why: str, *stderr: str) -> ChildRestarting:
    """Its process ended with these last stderr lines."""
    return ChildRestarting(name, BackendExitedError(why, " | ".join(stderr)), 0.5)


def failed(name: str, why: str) -> ChildFailed:
    return ChildFailed(name, RuntimeError(why), 6)


def make_model(catalog: Catalog, *, required: frozenset[str] = frozenset()) -> StatusModel:
    return StatusModel(
        name="gw",
        config_path="/etc/gw.toml",
        catalog=catalog.watch,
        meters=Meters(),
        history=StateHistory(Watch(0.0)),
        frontends=lambda: [FrontendInfo("stdio", None, ("stdio",)), FrontendInfo("http", "http://h/mcp", ())],
        required=required,
        started_at=0.0,
    )


def in_flight(*methods: str) -> list[Call]:
    """What a backend's in-flight table holds: one call per method given."""
    return [Call(n, method, None, "s", ReplySlot()) for n, method in enumerate(methods, start=1)]
