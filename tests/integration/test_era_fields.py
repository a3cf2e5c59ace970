"""A client of the handshake era never sees what only 2026-07-28 defines (issue #24): a real modern backend
(the official Python SDK's server, which puts `resultType`, caching hints and its identity in `_meta` on its
results) behind the gateway, and the official SDK client pinned to the legacy era."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

from support import ROOT, sdk_client, write_config

SDK_SERVER: Final = ROOT / "tests" / "backends" / "sdk_sampling_server.py"
ERA_FIELDS: Final = {"resultType", "ttlMs", "cacheScope"}


def seen(result: Any) -> tuple[set[str], dict[str, Any]]:
    """The fields of a result as the SDK client got them (its own and extra ones), and its _meta."""
    fields = {name for name, value in result if value is not None} | set(result.model_extra or {})
    return fields, result.meta or {}


async def test_a_legacy_client_gets_a_modern_backends_results_without_that_eras_fields(
    tmp_path: Path,
) -> None:
    backend = {"name": "sdk", "command": sys.executable, "args": [str(SDK_SERVER)], "era": "modern"}
    config = write_config(tmp_path / "g.toml", [backend])
    async with sdk_client(config, tmp_path / "gateway.log") as client:
        echoed = await client.call_tool("echo", {"text": "hi"})
        assert echoed.content[0].text == "hi"  # type: ignore[union-attr]
        read = await client.read_resource("sdk://readme")
        assert read.contents[0].text == "read me"  # type: ignore[union-attr]
    for result in (echoed, read):
        fields, meta = seen(result)
        assert not fields & ERA_FIELDS, fields
        assert "io.modelcontextprotocol/serverInfo" not in meta, meta
    assert echoed.structured_content == {"result": "hi"}  # everything else is kept
