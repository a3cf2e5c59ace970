"""The stdio frontend: its transport (the gateway's own stdin and stdout, newline-delimited) and its
configured principal ([stdio]: stdio carries no token)."""

from __future__ import annotations

import os
import stat

import attrs
import trio

from actors.config import Config
from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.identity.principal import Principal
from actors.identity.scope_gate import ScopeGate
from actors.session.settings import SessionSettings


def stdio_principal(config: Config) -> Principal | None:
    """The stdio session's principal as [stdio] names it, or None without the table."""
    table = config.stdio
    return None if table is None else Principal(table.issuer, table.subject, frozenset(table.scopes))


def stdio_settings(principal: Principal | None, config: Config, settings: SessionSettings) -> SessionSettings:
    """The stdio session's settings: a scope gate first when the listeners say which tools need scopes."""
    tool_scopes = config.tool_scopes()
    if principal is None or not tool_scopes:
        return settings
    gate = ScopeGate(principal, tool_scopes, settings.route)  # a route's renames: judged as the catalog's
    return attrs.evolve(settings, middleware=(gate, *settings.middleware))


class _RegularFileStream(trio.abc.HalfCloseableStream):
    """A regular file cannot be polled: reads and writes run in a worker thread (`< requests.jsonl`)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await trio.to_thread.run_sync(os.read, self._fd, max_bytes or 65536)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[await trio.to_thread.run_sync(os.write, self._fd, view) :]

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        await trio.lowlevel.checkpoint()


def _stream(fd: int) -> trio.abc.HalfCloseableStream:
    """A trio stream over a duplicate of `fd` (so closing it leaves the process's own fd alone)."""
    own = os.dup(fd)
    if stat.S_ISREG(os.fstat(own).st_mode):
        return _RegularFileStream(own)
    return PipeStream(trio.lowlevel.FdStream(own))


def stdin_is_a_file() -> bool:
    """`< requests.jsonl`: the end of such a stdin is the end of the requests, not a client that quits."""
    try:
        return stat.S_ISREG(os.fstat(0).st_mode)
    except OSError:
        return False


def open_stdio_transport(max_bytes: int) -> LineStream:
    return LineStream(_stream(0), _stream(1), max_bytes)
