"""[policy] judges the backend URI a request reaches, however the client spells it (#34): a rule on a public
URI also denies its explicit `backend+` spelling, which the router takes even for a URI published bare. A
real gateway and a real backend process; the official SDK client in both eras (WebSocket and Streamable
HTTP), and raw stdio for what the SDK does not send (a 2025-03-26 batch, a 2026-07-28 listen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import orjson
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from sdk_websocket import websocket_client
from support import LEGACY_ERA, backend_entry, raw_gateway, running, with_http, with_websocket, write_config

from actors.protocol.eras import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY

RULES: Final = """
[policy]
[[policy.rules]]
name = "no admin pages"
effect = "deny"
when = 'mcp.resource.uri == "test://alpha/readme" || mcp.resource.uri.startsWith("test://alpha/items/")'
"""
DENIED: Final = (  # as listed, by its explicit prefix, under the template, and both
    "test://alpha/readme",
    "alpha+test://alpha/readme",
    "test://alpha/items/7",
    "alpha+test://alpha/items/7",
)
ALLOWED: Final = ("test://shared", "alpha+test://shared")
META: Final = {
    PROTOCOL_VERSION_KEY: "2026-07-28",
    CLIENT_CAPABILITIES_KEY: {},
    CLIENT_INFO_KEY: {"name": "spellings", "version": "1"},
}


def gateway_config(tmp_path: Path) -> Path:
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo", "--resources")])
    config = with_http(with_websocket(config))
    config.write_text(config.read_text() + RULES)
    return config


async def refused_or_read(client: Client, uri: str) -> str:
    try:
        read = await client.read_resource(uri)
    except MCPError as error:
        assert "Resource not found" in error.error.message or error.error.code == -32602, error.error
        return "refused"
    assert read.contents[0].text == f"[alpha] {uri.removeprefix('alpha+')}"  # type: ignore[union-attr]
    return "read"


@pytest.mark.parametrize("era", [LEGACY_ERA, "2026-07-28"])
async def test_every_spelling_of_a_denied_uri_is_refused_in_both_eras(tmp_path: Path, era: str) -> None:
    async with running(gateway_config(tmp_path)) as gateway:
        assert gateway.websocket_url is not None and gateway.http_url is not None
        if era == LEGACY_ERA:
            opened = websocket_client(gateway.websocket_url)
        else:
            opened = Client(streamable_http_client(gateway.http_url), mode=era)  # type: ignore[assignment]
        async with opened as client:
            assert [await refused_or_read(client, uri) for uri in DENIED] == ["refused"] * len(DENIED)
            assert [await refused_or_read(client, uri) for uri in ALLOWED] == ["read"] * len(ALLOWED)
            if era == LEGACY_ERA:
                for uri in DENIED:
                    with pytest.raises(MCPError, match="Resource not found"):
                        await client.subscribe_resource(uri)
                await client.subscribe_resource("alpha+test://shared")
    assert gateway.policy.decisions[("resources/read", "deny")] == len(DENIED)


async def test_a_batch_and_a_listen_are_judged_on_the_uri_they_reach(tmp_path: Path) -> None:
    async with raw_gateway(gateway_config(tmp_path), tmp_path / "gateway.log") as gateway:
        await gateway.initialize("2025-03-26")  # the one version with batches
        batch = [
            {"jsonrpc": "2.0", "id": n, "method": method, "params": {"uri": uri}}
            for n, (method, uri) in enumerate(
                [(m, u) for m in ("resources/read", "resources/subscribe") for u in (*DENIED, ALLOWED[1])]
            )
        ]
        await gateway.send_line(orjson.dumps(batch))
        answers: dict[Any, dict[str, Any]] = {a["id"]: a for a in orjson.loads(await gateway.next_line())}
        for n, request in enumerate(batch):
            allowed = request["params"]["uri"] in ALLOWED
            assert ("result" in answers[n]) == allowed, (request, answers[n])

        wanted = {"resourceSubscriptions": [*DENIED, *ALLOWED]}
        await gateway.request("L", "subscriptions/listen", {"notifications": wanted, "_meta": META})
        ack = await gateway.receive()
        assert ack.get("method") == "notifications/subscriptions/acknowledged", ack
        granted = ack["params"]["notifications"]["resourceSubscriptions"]
        assert granted == ["test://shared"]  # its second spelling is the same backend URI, watched already
