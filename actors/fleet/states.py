"""Parked input_required calls across replicas (MCP 2026-07-28 multi round-trip requests).

Every replica seals requestStates with one key derived from the fleet key (so any replica opens any
other's) and names itself in them (`o`). A modern retry is looked at before it reaches a session:
- it is claimed fleet-wide (Redis SET NX on a digest of the state, until the state expires): a state
  presented a second time, on any replica, is refused as used already;
- a state of a call parked on another replica (`h` is a parked call's handle) is forwarded to that replica
  over an internal HTTP hop, the client's own headers (its token included: the owner checks it again) and
  body as they came, plus a header signed with the fleet key saying the state is claimed already; the
  owner's answer goes back to the client as it comes. An owner that is gone (not registered, or not
  answering) gives the spec's start-over error (-32602, "Invalid requestState"): never a wrong answer.
Each replica registers the URL it is reached at (`{prefix}:replica:<name>`, refreshed every
REGISTER_EVERY_S, gone REGISTRATION_TTL_S after its last refresh, and registered again first thing when
Redis answers after it did not or answers empty: a retry forwarded meanwhile would find no owner).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from typing import Any, Final

import attrs
import trio

from actors.config.fleet_schema import FleetSettings
from actors.fleet.store import FleetStore, StoreUnavailableError
from actors.protocol.request_state import RequestStateError, RequestStateKey
from actors.session.parked import TTL_S

FORWARDED_HEADER: Final = "mcp-gateway-forwarded"
FORWARD_SKEW_S: Final = 30.0  # a forwarded request's signature is good this long
REGISTER_EVERY_S: Final = 5.0
REGISTRATION_TTL_S: Final = 15  # a replica not heard of for this long is gone
CLAIM_TTL_MS: Final = int((TTL_S + 60) * 1000)  # a state's lifetime (parked calls' TTL), with a margin
STATE_PURPOSE: Final = b"mcp-gateway/request-state/v1"
FORWARD_PURPOSE: Final = b"mcp-gateway/forward/v1"


def derived(key: bytes, purpose: bytes) -> bytes:
    """A key for one purpose from a fleet key (HMAC-SHA256 as the KDF: the fleet key is uniformly random)."""
    return hmac.new(key, purpose, hashlib.sha256).digest()


@attrs.frozen(slots=True)
class OwnedStateKey(RequestStateKey):
    """The fleet's requestState key: shared by every replica, each naming itself in what it seals."""

    owner: str = ""

    def seal(self, payload: dict[str, Any], *, ttl_s: float, now: float) -> str:
        return super().seal({**payload, "o": self.owner}, ttl_s=ttl_s, now=now)


@attrs.define(eq=False, kw_only=True)
class FleetStates:
    """Owns: this replica's registration and the forward signatures.
    Receives: modern retries from the HTTP front (`claim`, `owner_elsewhere`, `owner_url`).
    Sends: the registration to Redis every REGISTER_EVERY_S (`run`).
    Stops when: cancelled with the Redis link; the registration then expires.
    Errors: none escape; with Redis down a state is single use on each replica alone and a retry of a call
        parked elsewhere gets the start-over error."""

    settings: FleetSettings
    store: FleetStore
    url: str | None = None  # where the other replicas reach this one (the [http] listener's URL)
    key: OwnedStateKey = attrs.field(init=False)
    _forward_keys: tuple[bytes, ...] = attrs.field(init=False, repr=False)
    _url_set: trio.Event = attrs.field(factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        self.key = OwnedStateKey(derived(self.settings.keys[0], STATE_PURPOSE), owner=self.settings.replica)
        self._forward_keys = tuple(derived(key, FORWARD_PURPOSE) for key in self.settings.keys)
        self.store.on_back.insert(0, self.register)  # before the catch-ups, which may take a while

    async def register(self) -> None:
        """Where this replica is reached, in Redis for REGISTRATION_TTL_S (nothing while it is not known
        yet, or Redis is away)."""
        url = self.url
        if url is not None:
            with contextlib.suppress(StoreUnavailableError):
                await self.store.command(
                    lambda client: client.set(self._registration(), url, ex=REGISTRATION_TTL_S)
                )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self.register()
                with trio.move_on_after(REGISTER_EVERY_S):
                    await self._url_set.wait()
                self._url_set = trio.Event()
        finally:
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(self.settings.redis_timeout_s),
                contextlib.suppress(StoreUnavailableError),
            ):
                await self.store.command(lambda client: client.delete([self._registration()]), parting=True)

    def reached_at(self, url: str) -> None:
        """Where the other replicas reach this one: registered at once, then refreshed."""
        self.url = url
        self._url_set.set()

    def payload_of(self, state: object) -> dict[str, Any] | None:
        """What a state holds, when the fleet sealed it and it has not expired."""
        try:
            return self.key.open(state, now=time.time())
        except RequestStateError:
            return None

    def owner_elsewhere(self, payload: dict[str, Any]) -> str | None:
        """The replica holding a parked call this state continues, when it is not this one."""
        owner = payload.get("o")
        parked = "h" in payload
        return owner if parked and isinstance(owner, str) and owner != self.settings.replica else None

    async def claim(self, state: str) -> bool:
        """The state marked used fleet-wide: False when it was already (Redis down: True, each replica's
        own memory of spent states still refuses a replay there)."""
        from coredis import PureToken  # the `fleet` extra

        key = self._spent(state)
        try:
            claimed = await self.store.command(
                lambda client: client.set(key, b"1", condition=PureToken.NX, px=CLAIM_TTL_MS)
            )
        except StoreUnavailableError:
            return True
        return bool(claimed)

    async def release(self, state: str) -> None:
        """A state this replica claimed for a retry that was refused before any session saw it (429, 503:
        the client is told to retry): it may be used again."""
        key = self._spent(state)
        with contextlib.suppress(StoreUnavailableError):
            await self.store.command(lambda client: client.delete([key]))

    def _spent(self, state: str) -> str:
        digest = hashlib.sha256(state.encode("ascii", "replace")).hexdigest()[:40]
        return f"{self.settings.key_prefix}:spent:{digest}"

    async def owner_url(self, owner: str) -> str | None:
        try:
            raw = await self.store.command(lambda client: client.get(self._registration(owner)))
        except StoreUnavailableError:
            return None
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else None

    def sign(self, body: bytes, now: float | None = None) -> str:
        stamp = str(int(time.time() if now is None else now))
        return f"{stamp}.{self._tag(self._forward_keys[0], stamp, body)}"

    def forwarded(self, header: str | None, body: bytes, now: float | None = None) -> bool:
        """Whether `header` is a replica's signature over this body, recent: the state is claimed already. A
        client may send the header too: anything not ASCII is no signature (`isdigit` takes "²", which `int`
        refuses; `hmac.compare_digest` refuses non-ASCII text)."""
        if not header or len(header) > 128 or not header.isascii():
            return False
        stamp, _, tag = header.partition(".")
        if not stamp.isdigit():
            return False
        if abs((time.time() if now is None else now) - int(stamp)) > FORWARD_SKEW_S:
            return False
        return any(hmac.compare_digest(tag, self._tag(key, stamp, body)) for key in self._forward_keys)

    @staticmethod
    def _tag(key: bytes, stamp: str, body: bytes) -> str:
        return hmac.new(
            key, stamp.encode() + b"." + hashlib.sha256(body).digest(), hashlib.sha256
        ).hexdigest()

    def _registration(self, replica: str | None = None) -> str:
        return f"{self.settings.key_prefix}:replica:{replica or self.settings.replica}"
