"""What the resource-server tests share: a raw initialize POST, a free loopback port, and a JWT signed with
HMAC by hand (PyJWT itself refuses to use a PEM public key as an HMAC secret, which is the attack)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
from typing import Any, Final

INITIALIZE: Final = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
POST_HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hmac_token(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{part(json.dumps(header).encode())}.{part(json.dumps(claims).encode())}"
    return f"{signing_input}.{part(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"
