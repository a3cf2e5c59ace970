"""A remote backend's [backends.auth] and forward_headers, resolved and checked against each other and its
url: the auth's secrets read (as a header carries them), and each header the gateway writes claimed once.

What a check refuses, and why:
- token_exchange or forward_headers on a WebSocket backend: a WebSocket carries headers once, in its
  handshake, for every caller at once; a caller's token or headers have no request of their own there.
- a forwarded or auth header that is a protocol header (Mcp-Session-Id, Content-Type...): the gateway's.
- authorization, cookie or proxy-authorization in forward_headers without allow_client_credentials: a
  client's credential reaches a backend only when the operator says so (the MCP spec forbids passthrough).
- the same header from two places (auth and headers, auth and forward_headers): one would silently win.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from actors.config.auth_schema import (
    CLIENT_CREDENTIAL_HEADERS,
    AuthKind,
    BackendAuth,
    StaticAuth,
    is_protocol_header,
)
from actors.config.backend_schema import BackendKind, RemoteBackend
from actors.config.errors import Problem
from actors.config.secret import HEADER, VARIABLE, resolve_secret


def resolve_remote(backend: RemoteBackend, key: str, folder: Path, problems: list[Problem]) -> RemoteBackend:
    """The backend with its auth's secrets read; its auth and forward_headers checked (problems appended)."""
    _check_forwarded(backend, key, problems)
    for name, value in backend.headers.items():
        if isinstance(value, str) and HEADER.refused.search(value):
            reason = "holds a line break, a control character or a character outside ASCII, which an HTTP"
            problems.append((f"{key}.headers.{name}", reason + " header cannot carry"))
    auth = backend.auth
    if auth is None:
        return backend
    _check_auth(backend, auth, key, problems)
    if isinstance(auth, StaticAuth):
        secret = resolve_secret(auth.secret, f"{key}.auth.secret", folder, problems, HEADER)
        return attrs.evolve(backend, auth=attrs.evolve(auth, secret=secret))
    # form-encoded wherever it goes (HTTP Basic or the form): any text but a NUL
    secret = resolve_secret(auth.client_secret, f"{key}.auth.client_secret", folder, problems, VARIABLE)
    return attrs.evolve(backend, auth=attrs.evolve(auth, client_secret=secret))


def _check_forwarded(backend: RemoteBackend, key: str, problems: list[Problem]) -> None:
    if backend.forward_headers and backend.kind is BackendKind.WEBSOCKET:
        reason = (
            "applies to http(s):// backends only: a WebSocket sends its headers once, at its handshake, for"
            " every caller at once"
        )
        problems.append((f"{key}.forward_headers", reason))
        return
    seen: set[str] = set()
    for index, name in enumerate(backend.forward_headers):
        lower = name.lower()
        where = f"{key}.forward_headers[{index}]"
        if lower in seen:
            problems.append((where, f"{name!r} is named twice"))
        elif is_protocol_header(lower):
            problems.append((where, f"{name!r} is a header the gateway writes itself"))
        elif lower in CLIENT_CREDENTIAL_HEADERS and not backend.allow_client_credentials:
            reason = (
                f"{name!r} is a client's credential: the gateway never passes one on unless"
                " allow_client_credentials = true (prefer [backends.auth])"
            )
            problems.append((where, reason))
        seen.add(lower)


def _check_auth(backend: RemoteBackend, auth: BackendAuth, key: str, problems: list[Problem]) -> None:
    if auth.kind is AuthKind.TOKEN_EXCHANGE and backend.kind is BackendKind.WEBSOCKET:
        reason = (
            "token_exchange needs an http(s):// backend: a WebSocket carries one credential, at its"
            " handshake, for every caller at once (use static or client_credentials)"
        )
        problems.append((f"{key}.auth.kind", reason))
    header = auth.header.lower()
    if is_protocol_header(header):
        problems.append((f"{key}.auth.header", f"{auth.header!r} is a header the gateway writes itself"))
    for name in backend.headers:  # headers_env's are in headers by now: said under their own key below
        if name.lower() == header and name not in backend.headers_env:
            problems.append((f"{key}.headers.{name}", f"[backends.auth] sets {auth.header!r} already"))
    for name in backend.headers_env:
        if name.lower() == header:
            problems.append((f"{key}.headers_env.{name}", f"[backends.auth] sets {auth.header!r} already"))
    if header in (name.lower() for name in backend.forward_headers):
        problems.append((f"{key}.forward_headers", f"[backends.auth] sets {auth.header!r}: not forwarded"))
