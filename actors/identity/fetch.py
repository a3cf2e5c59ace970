"""Reading an issuer's documents over HTTP: its authorization-server metadata (RFC 8414, or OpenID Connect
discovery) and its JWKS, with the lifetime its Cache-Control gives them.

A document is JSON of at most MAX_DOCUMENT_BYTES, read whole within FETCH_TIMEOUT_S; anything else, or a
status other than 200, is a FetchError naming the URL and what was wrong. Redirects are not followed.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx2
import orjson
import trio

from actors.protocol.codec import clip

MAX_DOCUMENT_BYTES: Final = 1 << 20  # a JWKS of a few dozen keys is a few KB
# One fetch, connection to last byte. The HTTP client's timeout bounds each read only: a server sending a
# byte now and then would otherwise hold the keeper, and its issuer's keys, forever.
FETCH_TIMEOUT_S: Final = 10.0
_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)
_NO_CACHE: Final = re.compile(r"(?:^|,)\s*(?:no-cache|no-store)\s*(?:,|$)", re.IGNORECASE)


class FetchError(Exception):
    """A document that could not be read: its URL and why."""


def max_age_s(cache_control: str | None) -> float | None:
    """The lifetime Cache-Control gives a response: max-age seconds, 0 for no-cache/no-store, else None."""
    if not cache_control:
        return None
    if _NO_CACHE.search(cache_control):
        return 0.0
    match = _MAX_AGE.search(cache_control)
    return float(match[1]) if match else None


async def fetch_json(client: httpx2.AsyncClient, url: str) -> tuple[Any, float | None]:
    """The JSON document at `url` and its max-age (None: the server gave none)."""
    with trio.move_on_after(FETCH_TIMEOUT_S):
        return await _fetch_json(client, url)
    raise FetchError(f"{url} did not send its whole answer within {FETCH_TIMEOUT_S:.0f}s")


async def _fetch_json(client: httpx2.AsyncClient, url: str) -> tuple[Any, float | None]:
    try:
        async with client.stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code != 200:
                raise FetchError(f"{url} answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise FetchError(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
            lifetime = max_age_s(response.headers.get("cache-control"))
    except httpx2.HTTPError as exc:
        raise FetchError(f"{url}: {type(exc).__name__}: {clip(str(exc))}") from None
    try:
        return orjson.loads(body), lifetime
    except orjson.JSONDecodeError:
        raise FetchError(f"{url} sent something other than JSON") from None


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order clients try them: RFC 8414 (path inserted after the
    host), OpenID Connect with the path inserted, OpenID Connect appended to the issuer."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(where: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, where, "", ""))

    urls = [
        at(f"/.well-known/oauth-authorization-server{path}"),
        at(f"/.well-known/openid-configuration{path}"),
        at(f"{path}/.well-known/openid-configuration"),
    ]
    return list(dict.fromkeys(urls))


async def discover_jwks_uri(client: httpx2.AsyncClient, issuer: str) -> str:
    """The `jwks_uri` of the issuer's metadata, from the first metadata URL that answers with a document
    naming this very issuer (RFC 8414 §3.3: a document naming another is not this issuer's)."""
    failures = []
    for url in metadata_urls(issuer):
        try:
            document, _ = await fetch_json(client, url)
        except FetchError as exc:
            failures.append(str(exc))
            continue
        if not isinstance(document, dict) or document.get("issuer") != issuer:
            failures.append(f"{url} names another issuer")
            continue
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or urlsplit(jwks_uri).scheme not in ("http", "https"):
            failures.append(f"{url} has no http(s) jwks_uri")
            continue
        return jwks_uri
    raise FetchError(f"no metadata for issuer {issuer}: {'; '.join(failures)}")
