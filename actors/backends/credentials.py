"""What a request to a remote backend carries besides the protocol's own headers: the backend's credential
and, on a client's call, the client headers the backend's `forward_headers` names. Nothing else of a
client's reaches a backend: not its Authorization, not its Cookie, not any header it was not named.

The credential by [backends.auth] kind:
- static: the secret as `format` writes it, in `header`, on every request (the WebSocket handshake, every
  HTTP request), a constant of the run;
- client_credentials: the gateway's own token from the broker, on every request;
- token_exchange: on a client's call, the caller's token exchanged by the broker for this backend's (a call
  whose client sent no token is refused, never sent as the gateway); on the gateway's own requests
  (initialize, listings, pings, the GET stream) its own token, or nothing with `own_requests = "none"`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from actors.backends.token_broker import TokenBroker, TokenUnavailableError
from actors.backends.token_cache import Minted
from actors.config.auth_schema import (
    BackendAuth,
    OwnRequests,
    StaticAuth,
    TokenEndpointAuth,
    TokenExchangeAuth,
)
from actors.config.backend_schema import RemoteBackend
from actors.protocol.envelopes import Call
from actors.protocol.on_behalf import OnBehalf

GATEWAY_SESSION: Final = "gateway"  # the session name of the gateway's own requests (connection.py)
NO_TOKEN: Final = (
    "it acts on behalf of the caller (token_exchange) and this call's client sent no token to exchange: "
    "call it through a listener that checks tokens"
)


@attrs.define(eq=False, kw_only=True)
class Credentials:
    """Owns: nothing (its broker owns the tokens). One backend's rule for what its requests carry.
    Receives: `headers_for` from the backend's transport, for each request it makes.
    Sends: nothing.
    Stops when: its backend does.
    Errors: TokenUnavailableError, with what to tell the call's client."""

    backend: str
    header: str  # the credential's header, lower-case
    static: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # the auth's constant header, if static
    broker: TokenBroker | None = None
    exchange: bool = False  # token_exchange: a client's call carries its caller's exchanged token
    own_token: bool = True  # the gateway's own requests carry the gateway's own token (broker kinds)
    forward: tuple[str, ...] = ()  # lower-case names of the client headers a call may carry

    @classmethod
    def of(cls, backend: RemoteBackend, broker: TokenBroker | None) -> Credentials:
        auth: BackendAuth | None = backend.auth
        static = {auth.header: auth.header_value()} if isinstance(auth, StaticAuth) else {}
        exchange = isinstance(auth, TokenExchangeAuth)
        own_token = not (exchange and auth.own_requests is OwnRequests.NONE)  # type: ignore[union-attr]
        return cls(
            backend=backend.name,
            header=auth.header.lower() if auth is not None else "",
            static=static,
            broker=broker if isinstance(auth, TokenEndpointAuth) else None,
            exchange=exchange,
            own_token=own_token,
            forward=tuple(name.lower() for name in backend.forward_headers),
        )

    @property
    def per_request(self) -> bool:
        """Whether each request's headers must be asked for (a broker's token, forwarded headers)."""
        return self.broker is not None or bool(self.forward)

    def whose(
        self, message: dict[str, Any], call_of: Callable[[object], Call | None] | None
    ) -> tuple[OnBehalf | None, bool]:
        """Whom a message is sent for: a client's call (what it carries on its caller's behalf), or the
        gateway itself (`own`: its requests, notifications and answers), as its link's table (`call_of`)
        says now, when the call is written."""
        if call_of is None or "method" not in message:
            return None, True
        call = call_of(message.get("id"))
        if call is None or call.session == GATEWAY_SESSION:
            return None, True
        return call.on_behalf, False

    async def headers_for(
        self, on_behalf: OnBehalf | None, own: bool
    ) -> tuple[dict[str, str], Minted | None]:
        """The headers of one request (besides the static ones) and the token it carries, if a broker's:
        `own` for the gateway's own requests, else a client's call, `on_behalf` its caller's."""
        headers: dict[str, str] = {}
        if not own and on_behalf is not None and self.forward:
            for name in self.forward:
                value = on_behalf.headers.get(name)
                if value is not None:
                    headers[name] = value
        broker = self.broker
        if broker is None:
            return headers, None
        if self.exchange and not own:
            caller = on_behalf.token if on_behalf is not None else None
            if caller is None:
                raise TokenUnavailableError(NO_TOKEN)
            minted = await broker.token_for(caller)
        elif self.own_token:
            minted = await broker.token_for(None)
        else:
            return headers, None
        headers[self.header] = minted.header_value
        return headers, minted
