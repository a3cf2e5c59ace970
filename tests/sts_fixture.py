"""A small security token service for tests: an OAuth token endpoint on a free loopback port (hypercorn,
in the test's own Trio run) that grants client_credentials and RFC 8693 token exchanges.

An exchange keeps the subject token's `sub`, gives the new token the requested `aud` (the audience, else
the resource) and sets `act` to the client that asked (RFC 8693 4.1); the tokens are HS256 JWTs signed
with KEY, issued by ISSUER. Knobs, changeable while it runs: `latency_s` before answering, `gate` (an
answer waits for it), `fail_status` (every request answered with that status, e.g. 500), `refuse` (an
OAuth error for a 400), `expires_in` (None: the answer has no expires_in) and `opaque` (a fixed token to
grant instead of a JWT: a canary). Every request is recorded, its secrets left out.
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import parse_qs, unquote

import attrs
import jwt
import orjson
import trio
from oauth_support import asgi_server

KEY: Final = "sts-test-signing-key-of-at-least-32-bytes"
CLIENT_ID: Final = "mcp-gateway"
CLIENT_SECRET: Final = "sts-client-secret-for-the-gateway"
EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"


@attrs.define
class Sts:
    """The service's knobs and what it saw; `url` is its token endpoint once it runs."""

    url: str = ""
    latency_s: float = 0.0
    gate: trio.Event | None = None
    fail_status: int | None = None
    refuse: str | None = None
    expires_in: float | None = 300
    opaque: str | None = None
    requests: list[dict[str, Any]] = attrs.field(factory=list)  # each request's grant, subject, audience...
    granted: list[str] = attrs.field(factory=list)  # every token it granted
    arrived: trio.Event = attrs.field(factory=trio.Event)  # set at each request (a fresh one after)

    @property
    def issuer(self) -> str:
        return self.url.removesuffix("/token")

    def exchanges(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["grant_type"] == EXCHANGE]

    def own_grants(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["grant_type"] == "client_credentials"]

    async def answer(
        self, form: dict[str, list[str]], authorization: str | None
    ) -> tuple[int, dict[str, Any]]:
        client = _client(form, authorization)
        grant = form.get("grant_type", [""])[0]
        subject_token = form.get("subject_token", [""])[0]
        claims = jwt.decode(subject_token, options={"verify_signature": False}) if subject_token else {}
        self.requests.append(
            {
                "grant_type": grant,
                "client": client,
                "subject": claims.get("sub"),
                "subject_exp": claims.get("exp"),
                "audience": form.get("audience", []),
                "resource": form.get("resource", []),
                "scope": form.get("scope", [None])[0],
            }
        )
        self.arrived.set()
        self.arrived = trio.Event()
        if self.gate is not None:
            await self.gate.wait()
        if self.latency_s:
            await trio.sleep(self.latency_s)
        if client != CLIENT_ID:
            return 401, {"error": "invalid_client"}
        if self.fail_status is not None:
            return self.fail_status, {"error": "server_error"}
        if self.refuse is not None:
            return 400, {"error": self.refuse, "error_description": "refused by the test"}
        if grant == EXCHANGE and not claims:
            return 400, {"error": "invalid_request", "error_description": "subject_token is required"}
        if grant not in (EXCHANGE, "client_credentials"):
            return 400, {"error": "unsupported_grant_type"}
        return 200, self._grant(form, claims, client)

    def _grant(self, form: dict[str, list[str]], claims: dict[str, Any], client: str) -> dict[str, Any]:
        audience = form.get("audience") or form.get("resource") or []
        lifetime = self.expires_in if self.expires_in is not None else 300
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "sub": claims.get("sub", client),
            "aud": audience[0] if len(audience) == 1 else audience,
            "exp": int(time.time() + lifetime),
            "iat": int(time.time()),
            "jti": f"sts-{len(self.granted)}",
        }
        if claims:
            payload["act"] = {"sub": client}
        token = self.opaque or jwt.encode(payload, KEY, "HS256")
        self.granted.append(token)
        answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        if claims:
            answer["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        return answer


def _client(form: dict[str, list[str]], authorization: str | None) -> str | None:
    """The client id, when its secret is right (HTTP Basic, or client_secret_post)."""
    if authorization and authorization.lower().startswith("basic "):
        decoded = base64.b64decode(authorization[6:]).decode()
        client, _, secret = decoded.partition(":")
        client, secret = unquote(client), unquote(secret)
    else:
        client, secret = form.get("client_id", [""])[0], form.get("client_secret", [""])[0]
    return client if secret == CLIENT_SECRET else None


def sts_app(sts: Sts) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["method"] != "POST" or scope["path"] != "/token":
            status, answer = 404, {"error": "not_found"}
        else:
            status, answer = await sts.answer(parse_qs(body.decode()), headers.get("authorization"))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})

    return app


@asynccontextmanager
async def security_token_service() -> AsyncIterator[Sts]:
    sts = Sts()
    async with asgi_server(sts_app(sts)) as url:
        sts.url = f"{url}/token"
        yield sts


def verify(token: str, audience: str, issuer: str) -> dict[str, Any]:
    """A token this service granted, checked for `audience`; jwt's errors when it is not good."""
    return jwt.decode(token, KEY, algorithms=["HS256"], audience=audience, issuer=issuer)  # type: ignore[no-any-return]
