"""`watch_config` with the config file replaced by a FIFO, then by a link to /dev/zero (issue #25): each is
refused with one line naming the file, and the gateway goes on serving the config it has, neither frozen on
the FIFO's open nor reading zeros without end."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import trio
from support import RawClient, backend_entry, gateway_argv, search_stream, stop_process, write_config

REFUSED = re.compile(rb"(not a regular file)")


async def still_serving(gateway: RawClient, request_id: str) -> None:
    await gateway.call(request_id, "echo", text=request_id)
    assert (await gateway.answer_to(request_id))["result"]["structuredContent"] == {"text": request_id}


async def test_a_config_replaced_by_a_fifo_or_a_device_is_refused_and_serving_goes_on(tmp_path: Path) -> None:
    path = write_config(tmp_path / "g.toml", [backend_entry("keep", "--only=echo")], watch_config=True)
    process = await trio.lowlevel.open_process(
        gateway_argv(path, tmp_path / "gateway.log"), stdin=-1, stdout=-1, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    try:
        gateway = RawClient(process)
        await gateway.initialize()
        await still_serving(gateway, "before")
        path.unlink()
        os.mkfifo(path)
        await search_stream(process.stderr, REFUSED, "the FIFO's refusal")
        await still_serving(gateway, "after the fifo")
        path.unlink()
        path.symlink_to("/dev/zero")
        await search_stream(process.stderr, REFUSED, "the device's refusal")
        await still_serving(gateway, "after the device")
    finally:
        await stop_process(process)
