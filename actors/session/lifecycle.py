"""initialize, and the client's notifications/initialized: the session's way from NEW to OPERATING."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

import trio
from loguru import logger

from actors import __version__
from actors.catalog import CatalogView
from actors.middleware import ClientInfo
from actors.middleware.chain import MiddlewareChain
from actors.protocol.envelopes import CatalogChanged
from actors.protocol.eras import MODERN_VERSIONS, ModernEnvelope
from actors.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, rpc_error
from actors.protocol.messages import ErrorResponse, Message, Params, RequestId, Response
from actors.protocol.versions import negotiate_version
from actors.session import guard
from actors.session.fields import invalid_field, label
from actors.session.settings import SessionState

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

CATALOG_CHANGED: Final = CatalogChanged()


async def initialize(d: Dispatcher, request_id: RequestId, params: Params) -> Message:
    if d.state is not SessionState.NEW:
        return ErrorResponse(request_id, rpc_error(INVALID_REQUEST, "Invalid request: already initialized"))
    version = params.get("protocolVersion")
    if not isinstance(version, str):
        error = rpc_error(
            INVALID_PARAMS,
            "Invalid params: initialize needs protocolVersion (a string)",
            field="protocolVersion",
        )
        return ErrorResponse(request_id, error)
    for field in ("capabilities", "clientInfo"):
        if params.get(field) is not None and not isinstance(params[field], dict):
            return ErrorResponse(request_id, invalid_field(field, "an object"))
    d.state = SessionState.INITIALIZING
    d.version = negotiate_version(version)
    view = await settled_view(d, "initialize")
    d.state = SessionState.OPERATING
    d.operating.set()
    d.announced = guard.news(d)
    client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
    if d.settings.middleware:
        name = client.get("name") if isinstance(client.get("name"), str) else None
        d.chain = MiddlewareChain(d.settings.middleware, ClientInfo(d.session, d.subject, name))
    capabilities = params.get("capabilities")
    d.client_asks.capabilities = capabilities if isinstance(capabilities, dict) else {}
    d.forwarder.envelope = ModernEnvelope(
        MODERN_VERSIONS[0],
        d.client_asks.capabilities,
        client if all(isinstance(client.get(key), str) for key in ("name", "version")) else None,
    )
    logger.info(
        "client {} {} initialized (protocol {})",
        label(client.get("name")),
        label(client.get("version")),
        label(version),
    )
    result: dict[str, Any] = {
        "protocolVersion": d.version,
        "capabilities": view.server_capabilities(),
        "serverInfo": {"name": d.settings.server_name, "version": __version__},
    }
    instructions = view.instructions()
    if instructions:
        result["instructions"] = instructions
    return Response(request_id, result)


async def settled_view(d: Dispatcher, what: str) -> CatalogView:
    """Hold the first initialize (or, for a modern client, its first request) until every backend is ready
    or has ended its first start, so a client that lists tools once never sees an empty catalog only because
    it connected first. The hold is the session's once: later requests are not held again."""
    if d.settings.first_settle.over:
        return d.catalog.value
    with trio.move_on_after(d.settings.settle_timeout_s) as hold:
        await _until_settled(d)
    view = d.catalog.value
    late = [f"{name} ({status.describe()})" for name, status in view.backends.items() if not status.settled]
    if hold.cancelled_caught and late:
        logger.warning(
            "{} held {}s; answering with what is ready, without {}",
            what,
            d.settings.settle_timeout_s,
            ", ".join(late),
        )
    d.settings.first_settle.over = True
    return view


async def drain_time(d: Dispatcher) -> None:
    """How long requests in flight may still take once the client's input has ended: `drain_s`, counted
    from the end of the catalog's first settle when that has not come yet. A client that writes its
    requests and closes its input at once (`printf ... | mcp-gateway serve --stdio`) is answered once the
    backends have started (at most initialize_hold_s), not cut short while its initialize is held."""
    if not d.settings.first_settle.over and len(d.inflight):
        logger.info(
            "input ended; {} requests wait for the backends to start (at most {}s)",
            len(d.inflight),
            d.settings.settle_timeout_s,
        )
        with trio.move_on_after(d.settings.settle_timeout_s):
            await _until_settled(d)
    await trio.sleep(d.settings.drain_s)


async def _until_settled(d: Dispatcher) -> None:
    """Until every backend is ready or has ended its first start."""
    version, view = d.catalog.version, d.catalog.value
    while not view.settled:
        version, view = await d.catalog.wait_newer(version)


async def ready_once_operating(d: Dispatcher) -> None:
    await d.operating.wait()
    set_client_ready(d)


def set_client_ready(d: Dispatcher) -> None:
    if d.client_ready.is_set():
        return  # said twice: nothing new
    d.client_ready.set()
    if d.on_ready is not None:
        d.on_ready()
    assert d.asks_to is not None
    with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        d.asks_to.send_nowait(CATALOG_CHANGED)  # what changed since initialize is announced now
    if d.settings.clients is not None:
        d.settings.clients.join(d.session, d.asks_to)
