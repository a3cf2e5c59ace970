"""The two ends of a backend's run: its connection opened (a process spawned, a URL connected to) and its
link made; at its end, the calls still queued answered and the explanation of how it ended, once the exit
code and the last stderr lines are in."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final

import trio
from loguru import logger

from actors.backends.connection import BackendLink
from actors.backends.errors import (
    BackendExitedError,
    BackendRefusedError,
    BackendRejectedError,
    BackendStartError,
)
from actors.backends.over_http import is_http
from actors.backends.process import ProcessTransport, backend_environment
from actors.backends.sandboxing import sandboxed, verdict
from actors.backends.token_broker import TokenUnavailableError
from actors.config.commands import CommandNotFoundError, locate_command
from actors.config.secret import revealed
from actors.framing.transport import BackendTransport
from actors.protocol.envelopes import BackendCommand, Call, Reply, answer
from actors.protocol.errors import unavailable
from actors.protocol.messages import Notification
from actors.supply import PinMismatchError, Prepared, pinned

if TYPE_CHECKING:
    from actors.backends.actor import Backend

EXIT_INFO_WAIT_S: Final = 1.0  # after a crash, how long to wait for the exit code and last stderr lines


async def open_transport(backend: Backend, connection: trio.Nursery) -> BackendTransport:
    """This run's connection: the backend's process spawned, or its URL connected to (the reader task of a
    WebSocket in `connection`)."""
    url = backend.config.url
    if url is None:
        return await spawn(backend)
    headers = revealed(backend.config.headers)  # the values of its secrets, handed on
    credentials = backend.credentials
    if credentials is not None and credentials.broker is not None:
        await connection.start(credentials.broker.run)  # its requests live as long as this run
    logger.info("connecting to {}", url)
    if url.startswith(("http://", "https://")):
        from actors.backends.http import HttpBackendTransport  # httpx2: only to use it

        return await HttpBackendTransport.connect(
            connection, url, headers, backend.max_message_bytes, credentials
        )
    minted = None
    if credentials is not None:  # a WebSocket's credential goes in its handshake, for the connection
        try:
            extra, minted = await credentials.headers_for(None, own=True)
        except TokenUnavailableError as exc:
            raise BackendStartError(f"cannot connect to {url}: {exc}") from None
        headers = {**headers, **credentials.static, **extra}
    try:
        from actors.backends.websocket import WebSocketBackendTransport  # trio-websocket: only to use it

        return await WebSocketBackendTransport.connect(connection, url, headers, backend.max_message_bytes)
    except BackendRejectedError as exc:
        if exc.status == 401 and minted is not None and credentials is not None and credentials.broker:
            credentials.broker.refused(minted)  # the restart's handshake asks for a new token
        raise


async def spawn(backend: Backend) -> ProcessTransport:
    try:
        command = locate_command(backend.config)  # as `check` looks it up
    except CommandNotFoundError as exc:
        raise BackendStartError(f"command: {exc}") from None
    argv = [command, *backend.config.args]
    withheld = [name for name in backend.config.inherit_env if name in backend.withheld_env]
    if withheld and not backend.warned_env:
        backend.warned_env = True
        logger.warning(
            "inherit_env names {} which a listener reads its token secret from; not passed on",
            ", ".join(withheld),
        )
    # a secret reaches a stdio backend only through its environment, never its command line (readable by
    # every local user in /proc/PID/cmdline)
    env = backend_environment(revealed(backend.config.env), backend.config.inherit_env, backend.withheld_env)
    prepared = await _pinned(backend)  # a prepared backend's pins checked (actors/supply/), else no change
    env.update(prepared.env)  # its package manager pointed at its cache, offline
    argv = list(prepared.argv or argv)  # npx/uvx: the installed program itself, no package manager
    launch = await sandboxed(
        backend.config.name,
        argv,
        cwd=backend.config.cwd,
        env=env,
        settings=backend.sandbox,
        warned=backend.warned_sandbox,
        report_to=partial(setattr, backend.meter, "sandbox"),
        read_only=prepared.read_only,
    )
    transport = await ProcessTransport.spawn(
        argv,
        cwd=backend.config.cwd,
        env=env,
        max_bytes=backend.max_message_bytes,
        shutdown=backend.shutdown,
        sandbox=launch,
    )
    sandbox = f" (sandbox: {','.join(launch.plan.engines)})" if launch else ""
    logger.info("started process {}: {}{}", transport.pid, shlex.join(argv), sandbox)
    return transport


async def _pinned(backend: Backend) -> Prepared:
    """The check of a backend's pins at its spawn: what its spawn adds, or BackendRefusedError (pin_mismatch:
    left down, no restart loop) when its files drifted from the lock."""
    configured = (backend.config.command, *backend.config.args)
    if backend.lock is None:
        return Prepared()
    try:
        return await trio.to_thread.run_sync(pinned, backend.lock, backend.config.name, configured)
    except PinMismatchError as exc:
        raise BackendRefusedError(str(exc), state="pin_mismatch") from None


def link_over(
    backend: Backend, transport: BackendTransport, on_notification: Callable[[Notification], None]
) -> BackendLink:
    """A new connection's link (a run's, or its legacy lane's), with the backend's settings."""
    link = BackendLink(
        name=backend.config.name,
        transport=transport,
        on_notification=on_notification,
        cancel_scope=trio.CancelScope(),
        request_timeout_s=backend.request_timeout_s,
        clients=backend.clients,
        roots=backend.roots,
        roots_chosen=backend.config.roots is not None,
        meter=backend.meter,
        # over HTTP, the call on whose response stream a backend's request came (backends/ask_owner.py)
        stream_of=transport.origins.pop if is_http(transport) else None,
    )
    if is_http(transport):  # whom each request is for: its call, in this table
        transport.call_of = link.inflight_call
    return link


def start_link_tasks(link: BackendLink, transport: BackendTransport, nursery: trio.Nursery) -> None:
    """What keeps a connection going beside its calls: the transport's drain (a process's stderr and
    descendants), the link's reader and its timeout sweep."""
    if isinstance(transport, ProcessTransport):
        transport.cork_with(nursery)  # the frames of one burst in one write (framing/burst.py)
    nursery.start_soon(transport.drain)
    nursery.start_soon(link.read, nursery)
    nursery.start_soon(link.sweep)


async def explain_end(
    link: BackendLink, transport: BackendTransport, started: bool, error: Exception | None
) -> None:
    """Explain how the run ended, once the exit code and the last stderr lines are in. When the process
    died, its exit is the explanation, whatever the request that noticed it saw."""
    if isinstance(transport, ProcessTransport) and transport.sandbox is not None:
        transport.sandbox.release()  # alive, the gateway stops it: its lifeline's watcher stands down now
    with trio.move_on_after(EXIT_INFO_WAIT_S):
        await transport.ended.wait()
    if isinstance(link.lost, BackendExitedError):
        ended = transport.describe_end()
        stderr = transport.last_stderr() if isinstance(transport, ProcessTransport) else ""
        if started and transport.ended_cleanly:
            logger.info("{}", BackendExitedError(ended, stderr))
            return
        lost = (
            BackendExitedError(ended, stderr)
            if started
            else BackendStartError(f"exited during start-up: {ended}", stderr)
        )
        if isinstance(transport, ProcessTransport) and transport.sandbox is not None:
            sandbox = transport.sandbox
            raise verdict(lost, transport.process.returncode, list(transport.stderr_tail), sandbox.cgroup)
        raise lost
    if error is not None:
        raise error
    if link.lost is not None:
        raise link.lost


def fail_queued(name: str, inbox: trio.MemoryReceiveChannel[BackendCommand], reason: str) -> None:
    """Answer every call still queued in the inbox, then close it; later senders get BrokenResourceError."""
    error = unavailable(name, reason)
    with inbox:
        while True:
            try:
                command = inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            if isinstance(command, Call):
                answer(command, Reply(error=error))
