"""A backend of both eras, reached in each client's era (issue #24): the official Python SDK 2.3 backend
(tests/backends/sdk_dual_era.py) pins each connection to the era of its first request, so under the
default era "auto" the gateway speaks 2026-07-28 to it over the run's connection and, on a legacy client's
first call, opens a legacy lane (a second process, initialized) for legacy clients.

Real gateways in this process (their meters say which eras each backend is connected in), real backend
processes, the SDK client over WebSockets in either era.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from loguru import logger
from mcp import MCPError
from mcp_types import CreateMessageResult, ElicitResult, TextContent
from sdk_websocket import websocket_client
from support import (
    Notifications,
    fast_restarts,
    is_running,
    kill_quietly,
    running,
    url_printed_by,
    wait_until_gone,
    with_websocket,
    write_config,
)
from ts_modern import modern_server_argv

from actors.catalog import CatalogView
from actors.config import load_config
from actors.gateway import Gateway
from actors.runtime.watch import Watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc for the process count")

DUAL_ERA: Final = Path(__file__).resolve().parents[1] / "backends" / "sdk_dual_era.py"
MODERN: Final = "2026-07-28"
DEADLINE_S: Final = 30.0


def dual_era_backend(**settings: Any) -> dict[str, Any]:
    return {"name": "dual", "command": sys.executable, "args": [str(DUAL_ERA)], **settings}


async def sample(context: Any, params: Any) -> CreateMessageResult:
    return CreateMessageResult(
        role="assistant", content=TextContent(type="text", text="forty-two"), model="m"
    )


async def elicit(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"answer": "yes"})


CALLBACKS: Final = {"sampling_callback": sample, "elicitation_callback": elicit}


@asynccontextmanager
async def gateway_of(tmp_path: Path, **settings: Any) -> AsyncIterator[Gateway]:
    config = with_websocket(write_config(tmp_path / "g.toml", [dual_era_backend(**settings)]))
    async with running(config) as gateway:
        yield gateway


@asynccontextmanager
async def gateway_and_catalog(
    tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[Gateway, Watch[CatalogView]]]:
    """As gateway_of, with the catalog's Watch, to wait on a restart."""
    config = with_websocket(write_config(tmp_path / "g.toml", [dual_era_backend(**settings)]))
    gateway = Gateway(load_config(config))
    async with trio.open_nursery() as nursery:
        watch = await nursery.start(lambda task_status: gateway.run(task_status=task_status))
        try:
            yield gateway, watch
        finally:
            gateway.stop()


async def until(watch: Watch[CatalogView], settled: Callable[[CatalogView], bool]) -> None:
    """Wait for the catalog to change until `settled` holds."""
    version, view = watch.version, watch.value
    with trio.fail_after(DEADLINE_S):
        while not settled(view):
            version, view = await watch.wait_newer(version)


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return result.content[0].text  # type: ignore[no-any-return]


async def whoami(client: Any) -> tuple[int, str]:
    """The pid of the backend process that served the call, and the protocol version it was spoken in."""
    words = text_of(await client.call_tool("whoami", {})).split()
    return int(words[1]), words[3]


def processes_of_backend() -> list[int]:
    """This process's children running the dual-era backend."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if ppid == str(os.getpid()) and str(DUAL_ERA).encode() in cmdline and is_running(int(entry.name)):
            found.append(int(entry.name))
    return found


async def test_a_legacy_client_gets_the_backends_old_style_asks_over_a_legacy_lane(tmp_path: Path) -> None:
    async with gateway_of(tmp_path) as gateway:
        meter = gateway.meters.backend("dual")
        async with websocket_client(gateway.websocket_url, **CALLBACKS) as client:  # type: ignore[arg-type]
            assert meter.eras == "modern"  # found modern; no lane before a legacy client's call
            assert len(processes_of_backend()) == 1
            asked = await client.call_tool("ask_old_way", {"question": "the answer?"})
            assert text_of(asked) == "sampled forty-two; elicited yes"
            lane_pid, version = await whoami(client)
            assert version != MODERN and lane_pid != meter.pid
            assert meter.eras == "modern+legacy"
            assert sorted(processes_of_backend()) == sorted([meter.pid, lane_pid])  # type: ignore[list-item]


async def test_a_modern_client_gets_the_input_required_tools_over_the_modern_connection(
    tmp_path: Path,
) -> None:
    async with gateway_of(tmp_path) as gateway:
        url = gateway.websocket_url
        async with websocket_client(url, mode=MODERN, **CALLBACKS) as client:  # type: ignore[arg-type]
            answer = await client.call_tool("ask_new_way", {"question": "the answer?"})
            assert text_of(answer) == "new way: forty-two (state round-1)"
            pid, version = await whoami(client)
            assert (pid, version) == (gateway.meters.backend("dual").pid, MODERN)
        assert gateway.meters.backend("dual").eras == "modern"  # no legacy client: no lane
        assert len(processes_of_backend()) == 1
        # A legacy client beside it: both kinds of tool, each in its own era.
        async with (
            websocket_client(url, **CALLBACKS) as legacy,  # type: ignore[arg-type]
            websocket_client(url, mode=MODERN, **CALLBACKS) as modern,  # type: ignore[arg-type]
        ):
            assert text_of(await legacy.call_tool("ask_old_way", {"question": "q"})).startswith("sampled")
            assert text_of(await modern.call_tool("ask_new_way", {"question": "q"})).startswith("new way")
            assert (await whoami(modern))[1] == MODERN and (await whoami(legacy))[1] != MODERN


async def test_a_backend_pinned_modern_has_one_connection_and_no_lane(tmp_path: Path) -> None:
    async with (
        gateway_of(tmp_path, era="modern") as gateway,
        websocket_client(gateway.websocket_url, **CALLBACKS) as client,  # type: ignore[arg-type]
    ):
        pid, version = await whoami(client)
        assert (pid, version) == (gateway.meters.backend("dual").pid, MODERN)
        with pytest.raises(MCPError, match="no back-channel"):  # none on a modern connection: as pinned
            await client.call_tool("ask_old_way", {"question": "q"})
        assert gateway.meters.backend("dual").eras == "modern"
        assert processes_of_backend() == [pid]


async def test_the_legacy_lane_ends_with_the_run_and_with_the_gateway(tmp_path: Path) -> None:
    """The run's process is killed: the lane's process is stopped with the run, the restarted run opens a
    new lane on the next legacy call, and the gateway's exit leaves no process of either behind."""
    async with gateway_and_catalog(tmp_path, restart=fast_restarts()) as (gateway, catalog):
        meter = gateway.meters.backend("dual")
        async with websocket_client(gateway.websocket_url, **CALLBACKS) as client:  # type: ignore[arg-type]
            first_lane, _ = await whoami(client)
            first_run = meter.pid
            assert first_run is not None and first_lane != first_run
            run = catalog.value.backends["dual"].calls  # the first run's inbox
            os.kill(first_run, signal.SIGKILL)
            await wait_until_gone([first_run, first_lane])
            await until(
                catalog, lambda view: view.backends["dual"].ready and view.backends["dual"].calls is not run
            )
            second_lane, version = await whoami(client)
            assert version != MODERN and second_lane not in (first_lane, first_run, meter.pid)
            left = processes_of_backend()
            assert sorted(left) == sorted([meter.pid, second_lane])
    await wait_until_gone(left)
    assert processes_of_backend() == []


async def test_a_lane_with_no_call_for_lane_idle_s_is_closed_and_the_next_legacy_call_opens_another(
    tmp_path: Path,
) -> None:
    """A long-running gateway does not keep a second process for legacy clients that have gone quiet."""
    async with gateway_of(tmp_path, lane_idle_s=0.3) as gateway:
        meter = gateway.meters.backend("dual")
        async with websocket_client(gateway.websocket_url, **CALLBACKS) as client:  # type: ignore[arg-type]
            first_lane, version = await whoami(client)
            assert version != MODERN and first_lane != meter.pid
            await wait_until_gone([first_lane])  # closed for idleness: its process stopped
            assert meter.eras == "modern" and processes_of_backend() == [meter.pid]
            second_lane, version = await whoami(client)  # a new lane at once, no backoff
            assert version != MODERN and second_lane not in (first_lane, meter.pid)
            asked = await client.call_tool("ask_old_way", {"question": "q"})
            assert text_of(asked) == "sampled forty-two; elicited yes"  # the old way, over a lane
            assert meter.restarts == 0


async def test_a_lane_that_dies_is_its_backends_death_for_every_client_and_its_restart_intensity(
    tmp_path: Path,
) -> None:
    """Issue #34: a crash through a legacy client's call ends the run as the death of the backend's only
    process would: the call is answered naming the backend, the supervisor restarts the backend (counted),
    the other clients hear list_changed, and the next legacy call is served by a new lane."""
    notifications = Notifications()
    async with gateway_and_catalog(tmp_path, restart=fast_restarts()) as (gateway, catalog):
        meter, url = gateway.meters.backend("dual"), gateway.websocket_url
        async with (
            websocket_client(url, **CALLBACKS) as client,  # type: ignore[arg-type]
            websocket_client(url, message_handler=notifications.handle) as other,  # type: ignore[arg-type]
        ):
            lane, _ = await whoami(client)
            first_run = catalog.value.backends["dual"].calls
            with pytest.raises(MCPError, match="backend 'dual' is unavailable"):
                await client.call_tool("exit_now", {})
            await until(
                catalog,
                lambda view: view.backends["dual"].ready and view.backends["dual"].calls is not first_run,
            )
            assert meter.restarts == 1  # counted by the restart intensity
            await notifications.wait_for("notifications/tools/list_changed", 2)  # down, then back
            await wait_until_gone([lane])
            pid, version = await whoami(client)
            assert version != MODERN and pid not in (lane, meter.pid)  # a new lane of the new run
            assert (await whoami(other))[0] == pid  # one lane for every legacy client


async def test_a_hung_lane_is_declared_dead_by_health_pings_and_restarted(tmp_path: Path) -> None:
    """Issue #34: the lane is pinged as the run's connection is; a lane that stops answering (SIGSTOP) ends
    the run: the call in flight over it is answered long before its request timeout, and both processes
    are replaced."""
    health = {"interval_s": 0.2, "timeout_s": 0.3, "failures": 2}
    async with gateway_and_catalog(tmp_path, restart=fast_restarts(), health=health) as (gateway, catalog):
        meter = gateway.meters.backend("dual")
        async with (
            websocket_client(gateway.websocket_url, **CALLBACKS) as client,  # type: ignore[arg-type]
            trio.open_nursery() as nursery,
        ):
            lane, _ = await whoami(client)
            first_run, under_way, answered = meter.pid, trio.Event(), trio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                under_way.set()

            async def hold() -> None:
                with pytest.raises(MCPError, match=r"backend 'dual' is unavailable.*lane ended: hung"):
                    await client.call_tool("hold", {}, progress_callback=on_progress)
                answered.set()

            nursery.start_soon(hold)
            try:
                with trio.fail_after(10.0):  # its request timeout is 60 s
                    await under_way.wait()
                    os.kill(lane, signal.SIGSTOP)
                    await answered.wait()
                await wait_until_gone([lane, first_run])  # type: ignore[list-item]
            finally:
                kill_quietly([lane])
            await until(catalog, lambda view: view.backends["dual"].ready)
            assert meter.restarts == 1 and meter.pid != first_run
            pid, version = await whoami(client)
            assert version != MODERN and pid not in (lane, first_run, meter.pid)


async def test_a_modern_only_backend_refuses_the_lane_once_and_serves_legacy_clients_through_the_bridge(
    tmp_path: Path, node: Path
) -> None:
    argv = modern_server_argv(node)
    backend = {"name": "ts", "command": argv[0], "args": argv[1:]}
    config = with_websocket(write_config(tmp_path / "g.toml", [backend]))
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="INFO", format="{message}")
    try:
        async with running(config) as gateway:
            async with websocket_client(gateway.websocket_url) as client:  # type: ignore[arg-type]
                for text in ("first", "second", "third"):
                    echoed = await client.call_tool("echo", {"text": text})
                    assert text_of(echoed) == text
            assert gateway.meters.backend("ts").eras == "modern"
    finally:
        logger.remove(sink)
    log = "".join(lines)
    assert gateway.meters.backend("ts").restarts == 0, log
    refused = [line for line in lines if "refused initialize on a legacy lane" in line]
    assert len(refused) == 1 and "-32022" in refused[0], log  # tried once, remembered: never spawned again
    assert sum("opening a legacy lane" in line for line in lines) == 1, log


def dual_era_over_http() -> AbstractAsyncContextManager[str]:
    """The dual-era backend serving Streamable HTTP; its URL."""
    return url_printed_by([sys.executable, str(DUAL_ERA), "--http"])


async def test_an_http_backend_of_both_eras_gets_a_legacy_session_beside_its_modern_requests(
    tmp_path: Path,
) -> None:
    async with dual_era_over_http() as url:
        config = with_websocket(write_config(tmp_path / "g.toml", [{"name": "dual", "url": url}]))
        async with running(config) as gateway:
            websocket = gateway.websocket_url
            async with (
                websocket_client(websocket, **CALLBACKS) as legacy,  # type: ignore[arg-type]
                websocket_client(websocket, mode=MODERN, **CALLBACKS) as modern,  # type: ignore[arg-type]
            ):
                asked = await legacy.call_tool("ask_old_way", {"question": "q"})
                assert text_of(asked) == "sampled forty-two; elicited yes"
                answer = await modern.call_tool("ask_new_way", {"question": "q"})
                assert text_of(answer) == "new way: forty-two (state round-1)"
                assert (await whoami(legacy))[1] != MODERN and (await whoami(modern))[1] == MODERN
                assert gateway.meters.backend("dual").eras == "modern+legacy"


async def test_a_call_in_flight_over_the_lane_is_answered_naming_the_backend_when_the_run_ends(
    tmp_path: Path,
) -> None:
    async with gateway_of(tmp_path, restart=fast_restarts()) as gateway:
        meter = gateway.meters.backend("dual")
        async with (
            websocket_client(gateway.websocket_url, **CALLBACKS) as client,  # type: ignore[arg-type]
            trio.open_nursery() as nursery,
        ):
            under_way, answered = trio.Event(), trio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                under_way.set()

            async def hold() -> None:
                with pytest.raises(MCPError, match="backend 'dual' is unavailable"):
                    await client.call_tool("hold", {}, progress_callback=on_progress)
                answered.set()

            nursery.start_soon(hold)
            with trio.fail_after(DEADLINE_S):
                await under_way.wait()
                lanes = [pid for pid in processes_of_backend() if pid != meter.pid]
                assert meter.pid is not None and len(lanes) == 1
                os.kill(meter.pid, signal.SIGKILL)
                await answered.wait()
            await wait_until_gone(lanes)
