"""One trusted issuer's public keys, kept fresh by one supervised actor per issuer.

`IssuerKeys` is the shared, read-only side: the latest KeySet (replaced whole, never changed in place), and
the way a verifier asks for a refetch when a token names a key the set lacks. It lives as long as the
listener's config, across its keeper's restarts, so the last good set stays in use while the issuer is
unreachable. `KeysKeeper` is the actor: it finds the JWKS (a URL, a file, or the issuer's metadata), fetches
it with the gateway's async HTTP client, and fetches it again when its Cache-Control lifetime (bounded by
`refresh_min_s`/`refresh_max_s`) runs out, or at once when a verifier asks for an unknown `kid`, at most
once per `kid_cooldown_s`: random kids cannot make the gateway hammer the issuer.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

import attrs
import httpx2
import orjson
import trio
from loguru import logger

from actors.identity.fetch import FETCH_TIMEOUT_S, FetchError, discover_jwks_uri, fetch_json
from actors.identity.verify import KeySet
from actors.protocol.codec import clip
from actors.runtime.supervisor import ChildExitError, Restart, RestartPolicy

KID_WAIT_S: Final = 5.0  # how long a request with an unknown kid waits for the refetch it asked for
# An unreachable issuer is tried again with backoff, never given up on: its last good set stays in use.
KEEPER_POLICY: Final = RestartPolicy(
    restart=Restart.PERMANENT, max_restarts=1000, window_s=3600.0, backoff_initial_s=1.0, backoff_max_s=60.0
)


@attrs.define(eq=False)
class IssuerKeys:
    """Owns: the latest key set of one issuer and the counts of its fetches (read by the admin listener).
    Receives: `replace` from its keeper; `refetched_for` from verifiers (an unknown kid).
    Sends: nothing; a waiting verifier is woken when a new set arrives."""

    issuer: str
    kid_cooldown_s: float = 30.0
    current: KeySet | None = None
    fetches: int = 0
    failures: int = 0  # fetches that failed, the last good set staying in use
    next_fetch_at: float = math.inf  # trio time of the next scheduled fetch
    _wanted: trio.Event = attrs.field(factory=trio.Event)
    _fresh: trio.Event = attrs.field(factory=trio.Event)
    _last_kid_fetch: float = -math.inf

    def replace(self, keys: KeySet) -> None:
        self.current, self.fetches = keys, self.fetches + 1
        self._fresh.set()
        self._fresh = trio.Event()

    def failed(self) -> None:
        self.failures += 1

    async def wanted(self) -> None:
        """Until a verifier asks for a refetch; then the request is taken."""
        await self._wanted.wait()
        self._wanted = trio.Event()

    async def first_set(self) -> bool:
        """Wait (at most KID_WAIT_S) for the first set, when none was fetched yet; True once there is one."""
        if self.current is None and not self.failures:  # an issuer already failing is not waited for
            with trio.move_on_after(KID_WAIT_S):
                await self._fresh.wait()
        return self.current is not None

    async def refetched_for(self, kid: str) -> bool:
        """Ask the keeper for a new set because a token names `kid`, unless one was asked for within the
        cooldown; True when a new set arrived (it may or may not hold the key)."""
        now = trio.current_time()
        if now - self._last_kid_fetch < self.kid_cooldown_s:
            return False
        self._last_kid_fetch = now
        fresh = self._fresh
        self._wanted.set()
        logger.info(
            "issuer {}: a token names key {!r}, not in its key set; fetching the set again",
            self.issuer,
            clip(kid),
        )
        with trio.move_on_after(KID_WAIT_S):
            await fresh.wait()
            return True
        return False


@attrs.frozen(kw_only=True)
class JwksSource:
    """Where an issuer's keys come from: a URL, a file, or (neither) the issuer's own metadata."""

    jwks_url: str | None = None
    jwks_file: Path | None = None
    refresh_min_s: float = 60.0
    refresh_max_s: float = 3600.0
    refresh_default_s: float = 600.0  # when the server sends no Cache-Control max-age


@attrs.define(eq=False)
class KeysKeeper:
    """Owns: its HTTP client; the fetch schedule of one issuer's keys.
    Receives: refetch requests, through its IssuerKeys.
    Sends: each new key set to its IssuerKeys.
    Stops when: cancelled (the gateway stops).
    Errors: a fetch that fails (unreachable, not JSON, no usable key) ends the run with ChildExitError; its
        supervisor restarts it with backoff, and the last good set stays in use meanwhile."""

    source: JwksSource
    keys: IssuerKeys

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with logger.contextualize(issuer=self.keys.issuer):
            timeout = httpx2.Timeout(FETCH_TIMEOUT_S)
            async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client:
                where = await self._where(client)
                good_for_s = await self._fetch(client, where)
                task_status.started()
                while True:
                    with trio.move_on_after(good_for_s):
                        await self.keys.wanted()
                    good_for_s = await self._fetch(client, where)

    async def _where(self, client: httpx2.AsyncClient) -> str | Path:
        if self.source.jwks_file is not None:
            return self.source.jwks_file
        if self.source.jwks_url is not None:
            return self.source.jwks_url
        try:
            return await discover_jwks_uri(client, self.keys.issuer)
        except FetchError as exc:
            self.keys.failed()
            raise ChildExitError(str(exc)) from None

    async def _fetch(self, client: httpx2.AsyncClient, where: str | Path) -> float:
        """Fetch and install the set; how long it is good for."""
        try:
            if isinstance(where, Path):
                document, max_age = orjson.loads(await trio.Path(where).read_bytes()), None
            else:
                document, max_age = await fetch_json(client, where)
            keys = KeySet.from_jwks(document)
        except (FetchError, OSError, orjson.JSONDecodeError, ValueError) as exc:
            self.keys.failed()
            kept = "; the last good set stays in use" if self.keys.current is not None else ""
            raise ChildExitError(f"cannot read the keys of issuer {self.keys.issuer}: {exc}{kept}") from None
        self.keys.replace(keys)
        good_for_s = lifetime_s(max_age, self.source)
        self.keys.next_fetch_at = trio.current_time() + good_for_s
        logger.info("{} keys from {}; fetched again in {:.0f}s", len(keys), where, good_for_s)
        return good_for_s


def lifetime_s(max_age_s: float | None, source: JwksSource) -> float:
    """How long a fetched set is used before the next fetch: its max-age (the default when the server gave
    none), kept between the source's bounds."""
    wanted = source.refresh_default_s if max_age_s is None else max_age_s
    return min(max(wanted, source.refresh_min_s), source.refresh_max_s)
