"""A part of the fleet that fails (here its limits' sync, with a fault injected once) is logged and
restarted alone, as a backend is: the replica and its sessions go on. Before, the exception ended the
whole gateway."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio
from fleet_support import RedisServer, open_on, replica_config
from support import DEADLINE_S, captured_logs, running

from actors.fleet.limits import FleetLimits


async def test_a_fleet_part_that_fails_is_restarted_alone_and_the_replica_goes_on(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    original, runs, restarted = FleetLimits.run, 0, trio.Event()

    async def failing_once(
        self: FleetLimits, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            task_status.started()
            raise RuntimeError("a fault in the fleet's limits")
        restarted.set()
        await original(self, task_status=task_status)

    monkeypatch.setattr(FleetLimits, "run", failing_once)
    with captured_logs() as lines:
        async with (
            running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
            httpx2.AsyncClient(timeout=DEADLINE_S) as http,
        ):
            assert alpha.http_url and alpha.fleet
            with trio.fail_after(DEADLINE_S):
                await restarted.wait()
            assert alpha.fleet.store.available
            assert await open_on(http, alpha.http_url)  # the replica serves on
    assert any("a fault in the fleet's limits" in line and "restarting in" in line for line in lines)
