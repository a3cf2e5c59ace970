"""The client side of initialize with a backend: the versions and capabilities offered, the first listing of
each list the server has, the renewal of the sessions' resource subscriptions, and the BackendReady that
reports it all to the catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio
from loguru import logger

from actors import __version__
from actors.backends.connection import BackendLink, BackendRequestError
from actors.backends.errors import BackendStartError
from actors.backends.listing import first_listings
from actors.catalog.subscriptions import Subscriptions
from actors.protocol.envelopes import BackendCommand, BackendReady
from actors.protocol.messages import Notification
from actors.protocol.versions import LATEST_VERSION, SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from actors.backends.actor import Backend

# What the gateway offers backends as their client: everything it can pass on to some client session.
# Whether the session a request goes to can take it is checked per request.
CLIENT_CAPABILITIES: Final = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
}


async def handshake(
    backend: Backend, link: BackendLink, calls: trio.MemorySendChannel[BackendCommand]
) -> tuple[BackendReady, list[str]]:
    """initialize, the first listings and the subscriptions renewed (its caller bounds the time): the
    BackendReady for the catalog, and the kinds of list this server has."""
    init = await initialize(link, backend.gateway_name, backend.roots)
    capabilities = init.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    lists = await first_listings(link, capabilities)
    await renew_subscriptions(link, backend.config.name, backend.subscriptions)
    info = init.get("serverInfo") if isinstance(init.get("serverInfo"), dict) else {}
    instructions = init.get("instructions") if isinstance(init.get("instructions"), str) else None
    logger.info(
        "initialized {} {} (protocol {})", info.get("name"), info.get("version"), init["protocolVersion"]
    )
    ready = ready_report(backend.config.name, calls, lists, info, instructions, capabilities, link.list_hints)
    return ready, list(lists)


async def initialize(link: BackendLink, gateway_name: str, roots: str | tuple[str, ...]) -> dict[str, Any]:
    """The initialize request and the initialized notification: the server's InitializeResult. Raises
    BackendRequestError when the server refuses it, BackendStartError when it answers a version the
    gateway does not speak."""
    init = await link.request("initialize", initialize_params(gateway_name, roots))
    if not isinstance(init, dict) or init.get("protocolVersion") not in SUPPORTED_VERSIONS:
        version = init.get("protocolVersion") if isinstance(init, dict) else init
        raise BackendStartError(f"initialize answered an unsupported protocol version {version!r}")
    await link.send(Notification("notifications/initialized"))
    return init


def ready_report(
    name: str,
    calls: trio.MemorySendChannel[BackendCommand],
    lists: dict[str, tuple[dict[str, Any], ...]],
    info: dict[str, Any],
    instructions: str | None,
    capabilities: dict[str, Any],
    list_hints: dict[str, tuple[int | None, str | None]] | None = None,
) -> BackendReady:
    """The BackendReady of a run that has its lists, whichever era it speaks."""
    return BackendReady(
        name,
        lists.get("tools", ()),
        calls,
        info,
        instructions,
        lists.get("prompts", ()),
        lists.get("resources", ()),
        lists.get("templates", ()),
        capabilities,
        list_hints=dict(list_hints or {}),
    )


async def renew_subscriptions(link: BackendLink, name: str, subscriptions: Subscriptions | None) -> None:
    """A restarted server has forgotten what the sessions subscribed to: subscribe again."""
    uris = subscriptions.uris_of(name) if subscriptions is not None else []
    for uri in uris:
        try:
            await link.request("resources/subscribe", {"uri": uri})
        except BackendRequestError as exc:
            logger.warning("could not renew the subscription to {}: {}", uri, exc)
    if uris:
        logger.info("renewed {} resource subscriptions", len(uris))


def initialize_params(gateway_name: str, roots: str | tuple[str, ...]) -> dict[str, Any]:
    """What the gateway says of itself in initialize; `roots` as Backend.roots."""
    capabilities = dict(CLIENT_CAPABILITIES)
    if roots == "none":
        del capabilities["roots"]
    elif isinstance(roots, tuple):
        capabilities["roots"] = {"listChanged": False}  # the operator's roots do not change
    return {
        "protocolVersion": LATEST_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": gateway_name, "version": __version__},
    }
