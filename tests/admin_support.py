"""What the admin listener's tests share: a gateway subprocess with an [admin] table, its admin URL read from
the log line that announces it, and waits on the admin's own event stream (never on sleeps).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import orjson
import trio
from prometheus_client.parser import text_string_to_metric_families
from support import DEADLINE_S, ROOT, RawClient, drain, gateway_argv, search_stream, stop_process, toml_value

ADMIN_LINE: Final = re.compile(rb"admin listener on (http://\S+)")


def with_admin(config: Path, **settings: Any) -> Path:
    """Append an [admin] table (port 0: any free port)."""
    lines = ["", "[admin]", "port = 0", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")
    return config


@attrs.define
class AdminGateway:
    """A gateway process: its stdio client and the URL of its admin listener."""

    client: RawClient
    url: str
    token: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    async def get(self, path: str, **headers: str) -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=DEADLINE_S) as http:
            return await http.get(self.url + path, headers={**self.headers, **headers})

    async def status(self) -> dict[str, Any]:
        response = await self.get("/status")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    async def metrics(self) -> str:
        response = await self.get("/metrics")
        assert response.status_code == 200, response.text
        return response.text

    async def wait_status(self, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Read /events until a status for which `until` is true comes (each change sends one)."""
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(timeout=DEADLINE_S) as http,
                http.stream("GET", self.url + "/events", headers=self.headers) as response,
            ):
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        status = orjson.loads(line[6:])["status"]
                        if until(status):
                            return status  # type: ignore[no-any-return]
        raise AssertionError("the event stream ended")


def backend_of(status: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next(backend for backend in status["backends"] if backend["name"] == name)


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of the sample `name` whose labels include `labels`, or None when there is none."""
    for family in text_string_to_metric_families(metrics):
        for each in family.samples:
            if each.name == name and labels.items() <= each.labels.items():
                return float(each.value)
    return None


@asynccontextmanager
async def admin_gateway(
    config: Path, log_file: Path, env: Mapping[str, str] | None = None, token: str | None = None
) -> AsyncIterator[AdminGateway]:
    """The gateway over stdio, with its admin URL from its stderr; the rest of stderr is drained."""
    process = await trio.lowlevel.open_process(
        gateway_argv(config, log_file),
        stdin=-1,
        stdout=-1,
        stderr=-1,
        cwd=str(ROOT),
        env={**os.environ, **(env or {})},
    )
    assert process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            url = await search_stream(process.stderr, ADMIN_LINE, "the admin listener was announced")
            nursery.start_soon(drain, process.stderr)
            yield AdminGateway(RawClient(process), url, token)
            nursery.cancel_scope.cancel()
    finally:
        await stop_process(process)
