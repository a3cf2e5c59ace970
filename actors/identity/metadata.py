"""What a resource server tells clients: its Protected Resource Metadata (RFC 9728), served at
`/.well-known/oauth-protected-resource<path>` and `/.well-known/oauth-protected-resource`, and the
`WWW-Authenticate: Bearer` challenges that point to it (401 for a missing or bad token, 403
insufficient_scope). Every value that goes into a header was checked by the config loader (no quotes,
backslashes or control characters) or is one of the fixed words below."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import attrs
import orjson

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_HTTP_OF: Final = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def metadata_url(resource: str) -> str:
    """Where the metadata of `resource` is served: the well-known prefix put before its path (RFC 9728
    §3.1); a WebSocket resource's metadata is fetched over HTTP(S)."""
    parts = urlsplit(resource)
    scheme = _HTTP_OF.get(parts.scheme, "https")
    return urlunsplit((scheme, parts.netloc, WELL_KNOWN + parts.path.rstrip("/"), "", ""))


def metadata_paths(mcp_path: str) -> frozenset[str]:
    """The paths a listener serves its metadata at: with its MCP path (tried first by clients), and bare."""
    return frozenset({WELL_KNOWN + mcp_path.rstrip("/"), WELL_KNOWN})


@attrs.frozen(kw_only=True)
class ResourceServer:
    """One listener as an OAuth protected resource."""

    resource: str  # its public URL, path included
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] = ()
    required_scopes: tuple[str, ...] = ()

    def document(self) -> bytes:
        body: dict[str, object] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported:
            body["scopes_supported"] = list(self.scopes_supported)
        return orjson.dumps(body)

    def challenge(self, *, error: str | None = None, scopes: Iterable[str] | None = None) -> bytes:
        """A `WWW-Authenticate: Bearer` value: where the metadata is, the scopes the operation needs (all
        of them, in one challenge: those given, else the required ones, else all the supported ones), and
        `error` when a token was sent (invalid_token, insufficient_scope)."""
        needed = sorted(scopes) if scopes is not None else list(self.required_scopes or self.scopes_supported)
        parts = [f'resource_metadata="{metadata_url(self.resource)}"']
        if needed:
            parts.append(f'scope="{" ".join(needed)}"')
        if error is not None:
            parts.append(f'error="{error}"')
        return ("Bearer " + ", ".join(parts)).encode("ascii")
