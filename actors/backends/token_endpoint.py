"""One request to an OAuth token endpoint: the gateway's own token (client_credentials, RFC 6749 4.4) or a
caller's token exchanged for a backend's (RFC 8693), and its answer checked.

The client authenticates with HTTP Basic (its id and secret form-encoded first, RFC 6749 2.3.1) or in the
form (`client_auth = "post"`). The form asks for the configured audience (RFC 8693), resource (RFC 8707) and
scope. An answer is used only when it is JSON with an `access_token` a header can carry (visible ASCII, at
most MAX_TOKEN_CHARS), a `token_type` of Bearer (or N_A, RFC 8693's "not an access token" the backend is
to take as one) and a positive `expires_in` (DEFAULT_LIFETIME_S when absent). Anything else is a
TokenRequestError saying what, never holding a token; `down` tells an endpoint that is out of order
(unreachable, 5xx, an answer that is no token) from one that refused this request (4xx).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import attrs
import orjson
import trio

from actors.config.auth_schema import TOKEN_EXCHANGE, TokenEndpointAuth, TokenExchangeAuth
from actors.protocol.codec import clip
from actors.protocol.on_behalf import CallerToken

if TYPE_CHECKING:
    import httpx2

MAX_ANSWER_BYTES: Final = 64 * 1024  # a token answer is a few KB
MAX_TOKEN_CHARS: Final = 16 * 1024  # as the gateway's own listeners take a bearer token
DEFAULT_LIFETIME_S: Final = 300.0  # an answer without expires_in (RFC 6749 makes it optional)
MAX_LIFETIME_S: Final = 24 * 3600.0  # an endpoint's longer lifetime is taken as this
REASON_CHARS: Final = 200  # of an endpoint's error_description, as quoted in errors and the audit
SUBJECT_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
_HEADER_SAFE: Final = re.compile(r"[\x21-\x7e]+")
_BEARER_TYPES: Final = frozenset({"bearer", "n_a"})


class TokenRequestError(Exception):
    """Why no token came: `outcome` (refused, unreachable, failed) and the HTTP status, if one came."""

    def __init__(self, reason: str, outcome: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.status = status

    @property
    def down(self) -> bool:
        """The endpoint is out of order (not a refusal of this caller): every caller waits out the TTL."""
        return self.outcome != "refused"


@attrs.frozen
class Granted:
    """A token the endpoint granted, and for how long it said (seconds, as capped)."""

    token: str = attrs.field(repr=False)
    lifetime_s: float
    status: int


def token_form(auth: TokenEndpointAuth, subject: CallerToken | None) -> dict[str, Any]:
    """The form of the request: its grant, the caller's token for an exchange, what the token is for."""
    form: dict[str, Any] = {}
    if isinstance(auth, TokenExchangeAuth) and subject is not None:
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject.reveal(),
            "subject_token_type": SUBJECT_TOKEN_TYPE,
            "requested_token_type": auth.requested_token_type,
        }
    else:
        form = {"grant_type": "client_credentials"}
    if auth.audience:
        form["audience"] = list(auth.audience)
    if auth.resource:
        form["resource"] = list(auth.resource)
    if auth.scopes:
        form["scope"] = " ".join(auth.scopes)
    if auth.client_auth == "post":
        form["client_id"], form["client_secret"] = auth.client_id, auth.client_secret.reveal()
    return form


async def request_token(
    client: httpx2.AsyncClient, auth: TokenEndpointAuth, subject: CallerToken | None
) -> Granted:
    """Ask the endpoint once, within `auth.timeout_s` from connection to last byte."""
    import httpx2  # loaded with the broker's client, not at start-up

    basic = None
    if auth.client_auth == "basic":  # RFC 6749 2.3.1: each form-encoded before Basic encodes them
        basic = (quote(auth.client_id, safe=""), quote(auth.client_secret.reveal(), safe=""))
    headers = {"accept": "application/json"}
    url = auth.token_url
    try:
        with trio.fail_after(auth.timeout_s):
            async with client.stream(
                "POST", url, data=token_form(auth, subject), auth=basic, headers=headers
            ) as response:
                body = await _read(url, response)
                status = response.status_code
    except trio.TooSlowError:
        raise TokenRequestError(f"{url} did not answer within {auth.timeout_s}s", "unreachable") from None
    except httpx2.HTTPError as exc:
        raise TokenRequestError(f"cannot reach {url}: {exc or type(exc).__name__}", "unreachable") from None
    if status != 200:
        raise _refusal(url, status, body)
    return _granted(url, body)


async def _read(url: str, response: httpx2.Response) -> bytes:
    parts, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            status = response.status_code
            raise TokenRequestError(f"{url} answered more than {MAX_ANSWER_BYTES} bytes", "failed", status)
        parts.append(chunk)
    return b"".join(parts)


def _refusal(url: str, status: int, body: bytes) -> TokenRequestError:
    """A 4xx is a refusal of this request (its OAuth error named); anything else, the endpoint failing."""
    if 400 <= status < 500:
        return TokenRequestError(
            f"{url} refused: {_oauth_error(body) or f'HTTP {status}'}", "refused", status
        )
    return TokenRequestError(f"{url} answered HTTP {status}", "failed", status)


def _oauth_error(body: bytes) -> str | None:
    """`error` (and `error_description`) of an OAuth error answer, clipped; None when there is none."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, str):
        return None
    description = answer.get("error_description")
    shown = f"{error}: {description}" if isinstance(description, str) and description else error
    return clip(shown.encode("unicode_escape").decode("ascii"), REASON_CHARS)


def _granted(url: str, body: bytes) -> Granted:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise TokenRequestError(f"{url} answered 200 with no JSON", "failed", 200) from None
    if not isinstance(answer, dict):
        raise TokenRequestError(f"{url} answered 200 with no JSON object", "failed", 200)
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenRequestError(f"{url} answered 200 with no access_token", "failed", 200)
    if len(token) > MAX_TOKEN_CHARS or not _HEADER_SAFE.fullmatch(token):
        reason = f"an access_token no header can carry (visible ASCII, at most {MAX_TOKEN_CHARS} characters)"
        raise TokenRequestError(f"{url} answered {reason}", "failed", 200)
    kind = answer.get("token_type", "Bearer")
    if not isinstance(kind, str) or kind.lower() not in _BEARER_TYPES:
        shown = clip(repr(kind))
        raise TokenRequestError(f"{url} answered token_type {shown}, not Bearer", "failed", 200)
    return Granted(token, _lifetime_s(url, answer.get("expires_in")), 200)


def _lifetime_s(url: str, expires_in: object) -> float:
    if expires_in is None:
        return DEFAULT_LIFETIME_S
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or not expires_in > 0:
        raise TokenRequestError(f"{url} answered expires_in {clip(repr(expires_in))}", "failed", 200)
    return min(float(expires_in), MAX_LIFETIME_S)
