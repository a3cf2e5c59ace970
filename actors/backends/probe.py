"""The era probe: server/discover sent the way the spec's dual-era client sends it (brief §1.10, steps 1-6),
in place on the backend's own connection. The verdict is read by era.py.

A stdio process that exits on the probe (rmcp servers die on any request before initialize) is no business
of this module: the link is lost, the run's scope cancels the probe, and the backend actor starts the
process again as a legacy one (actor.py).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import attrs
import trio
from loguru import logger

from actors.backends.connection import BackendLink, BackendRequestError
from actors.backends.era import DISCOVER, EraVerdict, gateway_envelope, legacy, read_discover, read_refusal
from actors.backends.errors import BackendExitedError, BackendStartError
from actors.backends.process import ProcessTransport
from actors.config import BackendEra
from actors.framing.transport import BackendTransport
from actors.protocol.eras import MODERN_VERSIONS
from actors.protocol.errors import UNSUPPORTED_PROTOCOL_VERSION

Started = TypeVar("Started")


async def probe(link: BackendLink, gateway_name: str, timeout_s: float, *, over_http: bool) -> EraVerdict:
    """server/discover with the gateway's full envelope at the newest modern version, and once more at the
    version a -32022 names. No answer within `timeout_s`: legacy, except over HTTP, where it is an error
    (as 401, 403, 5xx and network errors are, which the HTTP transport turns into a lost connection)."""
    asked, again = MODERN_VERSIONS[0], False
    while True:
        outcome: EraVerdict | str | None = None
        with trio.move_on_after(timeout_s):
            params = {"_meta": gateway_envelope(gateway_name, asked).to_meta()}
            try:
                outcome = read_discover(await link.request(DISCOVER, params))
            except BackendRequestError as exc:
                outcome = read_refusal(exc.error, asked, again=again)
        if outcome is None:
            if over_http:
                raise BackendStartError(f"{DISCOVER} got no answer within {timeout_s}s")
            return legacy(f"{DISCOVER} got no answer within {timeout_s}s")
        if isinstance(outcome, EraVerdict):
            return outcome
        asked, again = outcome, True


@attrs.define(kw_only=True)
class EraState:
    """What the gateway knows of one backend's era across its runs; its Backend actor holds it.

    Under era "auto" the first start probes, and the verdict is kept for the gateway's run: a restart after
    a crash does not probe again. It is forgotten, so that the next start probes, on evidence that it is
    stale: a -32022 from the backend (to initialize or to a call, D9), or a backend once modern whose start
    no longer discovers it as such. A process that exits on the probe is legacy: its actor starts it again
    at once, which the supervisor never sees, so no restart is counted and nothing loops (the verdict is
    kept). Each verdict is logged once with its reason."""

    era: BackendEra
    gateway_name: str
    probe_timeout_s: float
    _known: EraVerdict | None = None  # the verdict kept for the next start
    # a modern backend that refused initialize on a legacy lane (lane.py): its legacy clients go through
    # the bridge for the rest of the gateway's run, or until its era is probed again
    modern_only: bool = False
    _probing: bool = False
    _logged: str | None = None

    async def verdict(self, link: BackendLink, *, over_http: bool) -> EraVerdict:
        """This start's verdict. A kept modern one comes without its DiscoverResult: the start discovers
        the backend's capabilities afresh."""
        if self.era is not BackendEra.AUTO:
            forced = MODERN_VERSIONS[0] if self.era is BackendEra.MODERN else None
            verdict = EraVerdict(self.era, f'era = "{self.era}" in the config', forced)
        elif self._known is not None:
            verdict = attrs.evolve(self._known, discovered=None)
        else:
            self._probing = True
            verdict = await probe(link, self.gateway_name, self.probe_timeout_s, over_http=over_http)
            await trio.lowlevel.checkpoint()  # a process that died on the probe has cancelled the run by now
            self._probing = False
            self._known = verdict
        self._log(verdict)
        return verdict

    def forget(self, why: str) -> None:
        """The kept verdict is stale: the next start probes (era "auto" only)."""
        if self.era is BackendEra.AUTO and self._known is not None:
            logger.info("its era is probed again at its next start: {}", why)
            self._known = None
            self.modern_only = False

    def lanes(self, verdict: EraVerdict) -> bool:
        """Whether a run in this verdict's era opens a legacy lane for legacy clients: a backend found
        modern under era "auto" that has not refused one (a pinned era is one connection, never two)."""
        return self.era is BackendEra.AUTO and verdict.modern and not self.modern_only

    async def checked(self, start: Awaitable[Started]) -> Started:
        """A start's handshake, whose failure shows a kept verdict stale: a -32022 (to initialize, say), or
        a backend kept as modern that no longer discovers as one."""
        try:
            return await start
        except BackendRequestError as exc:
            if exc.error.code == UNSUPPORTED_PROTOCOL_VERSION or (self._known and self._known.modern):
                self.forget(str(exc))
            raise
        except BackendStartError as exc:
            if self._known is not None and self._known.modern:
                self.forget(exc.without_stderr)
            raise

    def died_on_probe(self, link: BackendLink, transport: BackendTransport) -> bool:
        """Whether the run ended because its process exited during the probe. Then the backend is legacy
        and its actor starts it again without a probe."""
        probing, self._probing = self._probing, False
        if not (probing and isinstance(transport, ProcessTransport)):
            return False
        if not isinstance(link.lost, BackendExitedError):
            return False
        self._known = legacy(f"the process exited during the {DISCOVER} probe ({transport.describe_end()})")
        self._log(self._known, "; starting it again without the probe")
        return True

    def _log(self, verdict: EraVerdict, then: str = "") -> None:
        described = verdict.describe()
        if described != self._logged:
            logger.info("{}{}", described, then)
            self._logged = described
