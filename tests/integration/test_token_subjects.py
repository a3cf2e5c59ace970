"""A bearer token must name its subject, on every listener: tokens signed with the listener's own key and no
`sub` were all one principal ("-"), so each could take over the others' sessions. Real WebSocket and
Streamable HTTP listeners of a real gateway (in this process), tokens made with PyJWT."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import httpx2
import jwt
import pytest
from support import INITIALIZE, backend_entry, connect, running, with_http, with_websocket, write_config
from trio_websocket import ConnectionRejected

SECRET: Final = "token-subject-test-secret-long-enough"
VARIABLE: Final = "TOKEN_SUBJECT_TEST_SECRET"
POST_HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def bearer(**claims: Any) -> str:
    return "Bearer " + jwt.encode({"exp": int(time.time()) + 600, **claims}, SECRET, "HS256")


@pytest.mark.parametrize(
    "claims", [{}, {"sub": ""}, {"client_id": ""}], ids=["no sub", "empty sub", "empty id"]
)
async def test_a_token_naming_no_subject_is_refused_with_401_on_every_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claims: dict[str, Any]
) -> None:
    monkeypatch.setenv(VARIABLE, SECRET)
    config = write_config(tmp_path / "g.toml", [backend_entry("alpha", "--only=echo")])
    config = with_http(
        with_websocket(config, auth={"jwt_secret_env": VARIABLE}), auth={"jwt_secret_env": VARIABLE}
    )
    async with running(config) as gateway, httpx2.AsyncClient() as http:
        assert gateway.http_url is not None and gateway.websocket_url is not None
        refused = await http.post(
            gateway.http_url, json=INITIALIZE, headers={**POST_HEADERS, "authorization": bearer(**claims)}
        )
        assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert "names no subject" in refused.text
        with pytest.raises(ConnectionRejected) as rejected:
            headers = [(b"authorization", bearer(**claims).encode())]
            async with connect(gateway.websocket_url, extra_headers=headers, initialize=False):
                pass
        assert rejected.value.status_code == 401
        assert rejected.value.body is not None and b"names no subject" in rejected.value.body

        named = await http.post(
            gateway.http_url, json=INITIALIZE, headers={**POST_HEADERS, "authorization": bearer(sub="alice")}
        )
        assert named.status_code == 200, named.text
        async with connect(
            gateway.websocket_url, extra_headers=[(b"authorization", bearer(sub="a").encode())]
        ):
            pass
