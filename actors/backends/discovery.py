"""The start of a modern backend (MCP 2026-07-28): no initialize. Its capabilities, instructions and
serverInfo come from server/discover (the probe's answer, or a discover of its own when the era is forced),
its lists are read with the gateway's envelope, and the BackendReady is the same as a legacy start's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio
from loguru import logger

from actors.backends.era import DISCOVER, EraVerdict, read_discover
from actors.backends.errors import BackendStartError
from actors.backends.handshake import ready_report
from actors.backends.listing import first_listings
from actors.protocol.envelopes import BackendCommand, BackendReady
from actors.protocol.eras import SERVER_INFO_KEY

if TYPE_CHECKING:
    from actors.backends.actor import Backend
    from actors.backends.connection import BackendLink


async def start_modern(
    backend: Backend, link: BackendLink, calls: trio.MemorySendChannel[BackendCommand], verdict: EraVerdict
) -> tuple[BackendReady, list[str]]:
    """Discover (unless the probe did) and the first listings (its caller bounds the time): the
    BackendReady, and the kinds of list the server has. The link already stamps the gateway's envelope."""
    discovered = verdict.discovered
    if discovered is None:
        discovered = await link.request(DISCOVER)
        checked = read_discover(discovered)
        if not checked.modern:
            raise BackendStartError(f"taken for modern ({verdict.reason}), but {checked.reason}")
    capabilities = _object(discovered.get("capabilities"))
    lists = await first_listings(link, capabilities)
    info = _object(_object(discovered.get("_meta")).get(SERVER_INFO_KEY))
    instructions = discovered.get("instructions")
    instructions = instructions if isinstance(instructions, str) else None
    logger.info("discovered {} {} (protocol {})", info.get("name"), info.get("version"), link_version(link))
    ready = ready_report(backend.config.name, calls, lists, info, instructions, capabilities, link.list_hints)
    return ready, list(lists)


def link_version(link: BackendLink) -> str | None:
    return link.envelope.version if link.envelope is not None else None


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
