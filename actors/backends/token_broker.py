"""The token broker: one per backend whose [backends.auth] gets tokens from a token endpoint. It hands out
the gateway's own token (client_credentials) and each caller's exchanged token (token_exchange, RFC 8693),
asks the endpoint only when it holds no good one, and remembers what it was granted and what failed.

- A token is handed out from the cache until shortly before it expires (token_cache.serve_until), never
  past the caller's own token's `exp`: no exchange, no network, no message (a dict look-up).
- Calls that need the same token while it is being asked for wait on that one request (single flight:
  50 concurrent calls make one exchange).
- A request that failed is remembered `negative_ttl_s`: a refusal (4xx) for that key, an endpoint out of
  order (unreachable, 5xx, no token in its answer) for every key, so an outage is asked at most once per
  TTL. Its callers meanwhile get its error at once.
- A backend that refuses a token (HTTP 401) has it dropped (`refused`); the next request asks anew.
- Every request to the endpoint is an audit row (exchange_audit.py), never a token; every token granted is
  told to the redactor until it expires.

The requests run in the broker's own nursery, not its callers': a caller that gives up (its call cancelled
or timed out) does not cancel a request others wait on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import attrs
import trio
from loguru import logger

from actors.backends.token_cache import Minted, TokenCache, TokenKey, serve_until
from actors.backends.token_endpoint import TokenRequestError, request_token
from actors.config.auth_schema import AuthKind, TokenEndpointAuth, TokenExchangeAuth
from actors.middleware.exchange_audit import TokenRequestRow
from actors.protocol.on_behalf import CallerToken
from actors.runtime.redact import REDACTOR

if TYPE_CHECKING:
    import httpx2

MAX_PENDING: Final = 256  # requests to the endpoint under way per backend (one per caller at most)
AuditSink = Callable[[TokenRequestRow], Awaitable[None]]


class TokenUnavailableError(Exception):
    """No token for this request, and why (no token in it: safe to log and to send to its client)."""


@attrs.define(eq=False)
class _Pending:
    """One request under way, and what its waiters get."""

    done: trio.Event = attrs.field(factory=trio.Event)
    minted: Minted | None = None
    error: str | None = None


@attrs.define(eq=False, kw_only=True)
class TokenBroker:
    """Owns: the backend's TokenCache (across its runs), the requests under way (key -> _Pending), when the
        endpoint is next asked after it failed, its HTTP client and the nursery its requests run in.
    Receives: `token_for` from the backend's requests (a cached token without waiting); `refused` when the
        backend answered 401 to a token.
    Sends: one TokenRequestRow per request to `audit`; each token granted to the redactor.
    Stops when: cancelled with its backend's run; the cache stays for the next run.
    Errors: none of its own; a request that fails is its waiters' TokenUnavailableError."""

    backend: str
    auth: TokenEndpointAuth
    audit: AuditSink | None = None
    clock: Callable[[], float] = time.time  # wall clock: tokens expire by it
    cache: TokenCache = attrs.field(init=False)
    _own: TokenEndpointAuth = attrs.field(init=False)  # what the gateway's own token is asked with
    _target: str = attrs.field(init=False)  # what its tokens are for, as keys name it
    _pending: dict[TokenKey, _Pending] = attrs.field(init=False, factory=dict)
    _down_until: float = attrs.field(init=False, default=0.0)
    _down_reason: str = attrs.field(init=False, default="")
    _nursery: trio.Nursery | None = attrs.field(init=False, default=None)
    _client: httpx2.AsyncClient | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self.cache = TokenCache(self.auth.max_cached)
        self._target = self.auth.target
        self._own = self.auth.own() if isinstance(self.auth, TokenExchangeAuth) else self.auth

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        import httpx2  # a broker's client: only a gateway with a token endpoint loads it

        timeout = httpx2.Timeout(self.auth.timeout_s)
        try:
            async with (
                httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client,
                trio.open_nursery() as nursery,
            ):
                self._client, self._nursery = client, nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._client, self._nursery = None, None
            for pending in self._pending.values():  # their requests were cancelled with the nursery
                pending.error = f"backend '{self.backend}' is stopping"
                pending.done.set()
            self._pending.clear()

    # --- keys ---------------------------------------------------------------------------------------------

    def own_key(self) -> TokenKey:
        return (self.auth.token_url, self.auth.client_id, self.backend, self._target)

    def caller_key(self, caller: CallerToken) -> TokenKey:
        return (caller.issuer or "", caller.subject, self.backend, self._target)

    # --- handing tokens out --------------------------------------------------------------------------------

    async def token_for(self, caller: CallerToken | None) -> Minted:
        """The gateway's own token (`caller` None), or `caller`'s exchanged for this backend: cached, or
        asked for once however many wait. TokenUnavailableError says why there is none."""
        now = self.clock()
        key = self.own_key() if caller is None else self.caller_key(caller)
        minted = self.cache.get(key, now)
        if minted is not None:
            return minted
        if caller is not None and caller.expires_at is not None and caller.expires_at <= now:
            raise TokenUnavailableError("the caller's token has expired")
        pending = self._pending.get(key)
        if pending is None:
            pending = self._ask(key, caller, now)
        await pending.done.wait()
        if pending.minted is None:
            raise TokenUnavailableError(pending.error or "no token")
        return pending.minted

    def refused(self, minted: Minted) -> bool:
        """The backend answered 401 to `minted`: it is not handed out again. True when it was still the one
        in use (a second refusal of a token already replaced changes nothing)."""
        dropped = self.cache.drop(minted)
        if dropped:
            logger.info("backend refused a token it was given (HTTP 401); asking for a new one")
        return dropped

    def _ask(self, key: TokenKey, caller: CallerToken | None, now: float) -> _Pending:
        """A request for `key` started in the broker's nursery, or a _Pending already failed with the error
        remembered for it."""
        pending = _Pending()
        refused = self.cache.refusal(key, now)
        if now < self._down_until:
            refused = self._down_reason
        if refused is None and (self._nursery is None or self._client is None):
            refused = "its token broker is not running"
        if refused is None and len(self._pending) >= MAX_PENDING:
            refused = f"{MAX_PENDING} token requests are under way for it; try again"
        if refused is not None:
            pending.error = refused
            pending.done.set()
            return pending
        self._pending[key] = pending
        assert self._nursery is not None
        self._nursery.start_soon(self._request, key, caller, pending)
        return pending

    async def _request(self, key: TokenKey, caller: CallerToken | None, pending: _Pending) -> None:
        assert self._client is not None
        auth = self.auth if caller is not None else self._own
        cause = self.cache.cause(key)
        started, at = time.perf_counter(), self.clock()
        row = TokenRequestRow(
            at=at,
            backend=self.backend,
            grant_type=AuthKind.TOKEN_EXCHANGE if caller is not None else AuthKind.CLIENT_CREDENTIALS,
            issuer=key[0] or None,
            subject=key[1],
            target=self._target,
            cause=cause,
            outcome="ok",
            status=None,
            duration_s=0.0,
        )
        try:
            granted = await request_token(self._client, auth, caller)
        except TokenRequestError as exc:
            row = attrs.evolve(row, outcome=exc.outcome, status=exc.status, reason=str(exc))
            pending.error = self._failed(key, exc)
        else:
            now = self.clock()
            until = serve_until(
                now, granted.lifetime_s, self.auth.refresh_skew_s, caller and caller.expires_at
            )
            REDACTOR.mint(f"token:{self.backend}", granted.token, now + granted.lifetime_s)
            pending.minted = Minted(key, granted.token, until, self.auth.header_value(granted.token))
            self.cache.put(pending.minted)
            row = attrs.evolve(row, status=granted.status, lifetime_s=max(until - now, 0.0))
        finally:
            self._pending.pop(key, None)
            pending.done.set()
        row = attrs.evolve(row, duration_s=time.perf_counter() - started)
        if self.audit is not None:
            await self.audit(row)

    def _failed(self, key: TokenKey, error: TokenRequestError) -> str:
        """Remember a failure for negative_ttl_s (the endpoint's for every key, a refusal for its own); the
        error its waiters get."""
        ttl_s = self.auth.negative_ttl_s
        reason = f"no token for it: {error}"
        if ttl_s > 0:
            now = self.clock()
            if error.down:
                self._down_until, self._down_reason = now + ttl_s, f"{reason} (asked again after {ttl_s:g}s)"
            else:
                self.cache.refused(key, now + ttl_s, f"{reason} (asked again after {ttl_s:g}s)", now)
        logger.warning("token request failed: {}", error)
        return reason
