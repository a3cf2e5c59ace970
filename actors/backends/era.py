"""A backend's era, as the spec's dual-era client tells it (MCP 2026-07-28, versioning; brief §1.10): the
verdict of a server/discover probe, read from its answer, and the `_meta` a modern backend's requests carry.

Pure: no I/O. What a backend answers is hostile input: any shape is read, none raises but the two answers
the spec makes errors (a modern server that shares no version with the gateway, a second -32022).
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from actors import __version__
from actors.backends.errors import BackendError, BackendStartError
from actors.config import BackendEra
from actors.protocol.codec import clip, shown
from actors.protocol.eras import MODERN_VERSIONS, ModernEnvelope, is_modern
from actors.protocol.errors import UNSUPPORTED_PROTOCOL_VERSION
from actors.protocol.messages import RpcError

DISCOVER: Final = "server/discover"


class BackendEraError(BackendError):
    """A backend refused the protocol version it was spoken to in (-32022 to a call): the run ends, and
    the next start probes its era again."""


@attrs.frozen(slots=True)
class EraVerdict:
    """How the gateway speaks with one backend process or URL, and why. A modern verdict carries the
    version both speak and the DiscoverResult that showed it (None when the era was forced)."""

    era: BackendEra  # LEGACY or MODERN, never AUTO
    reason: str
    version: str | None = None
    discovered: dict[str, Any] | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def modern(self) -> bool:
        return self.era is BackendEra.MODERN

    def describe(self) -> str:
        """The log line: 'speaks 2026-07-28 (server/discover answered)' or 'legacy: ...'."""
        if self.modern:
            return f"speaks {self.version} ({self.reason})"
        return f"legacy: {self.reason}"


def legacy(reason: str) -> EraVerdict:
    return EraVerdict(BackendEra.LEGACY, reason)


def gateway_envelope(gateway_name: str, version: str = MODERN_VERSIONS[0]) -> ModernEnvelope:
    """The gateway's own envelope, for its own requests (probe, lists, listen, liveness) and for calls
    that are nobody's: no client capabilities, the gateway as clientInfo."""
    return ModernEnvelope(version, {}, {"name": gateway_name, "version": __version__})


def stamped(params: dict[str, Any] | None, envelope: ModernEnvelope) -> dict[str, Any]:
    """A request's params for a modern backend: the envelope's keys merged into `_meta` (progressToken,
    trace keys and the rest kept). Copies, never edits."""
    meta = params.get("_meta") if params is not None else None
    merged = {**meta, **envelope.to_meta()} if isinstance(meta, dict) else envelope.to_meta()
    return {**(params or {}), "_meta": merged}


def shared_version(versions: object) -> str | None:
    """The newest modern version the gateway speaks that `versions` (a list from the backend) names."""
    if not isinstance(versions, list):
        return None
    return next((version for version in MODERN_VERSIONS if version in versions), None)


def read_discover(result: object) -> EraVerdict:
    """A DiscoverResult sharing a modern version: modern; anything else: legacy."""
    if not isinstance(result, dict):
        return legacy(f"{DISCOVER} answered {shown(result)}")
    supported = result.get("supportedVersions")
    version = shared_version(supported)
    if version is not None and isinstance(result.get("capabilities", {}), dict):
        return EraVerdict(BackendEra.MODERN, f"{DISCOVER} answered", version, result)
    if not isinstance(supported, list):
        return legacy(f"{DISCOVER} answered without supportedVersions: {shown(result)}")
    return legacy(f"{DISCOVER} named no version the gateway speaks: {shown(supported)}")


def read_refusal(error: RpcError, asked: str, *, again: bool) -> EraVerdict | str:
    """The verdict of a JSON-RPC error to the probe at version `asked`, or the version to probe once more
    at (-32022 naming a shared modern version). Raises BackendStartError where the spec says the probe
    fails instead of falling back: a -32022 to the second probe, or one naming only modern versions the
    gateway does not speak."""
    described = f"{DISCOVER} got {error.code} ({clip(error.message)})"
    if error.code != UNSUPPORTED_PROTOCOL_VERSION:
        return legacy(described)
    supported = error.data.get("supported") if isinstance(error.data, dict) else None
    if not isinstance(supported, list) or not all(isinstance(version, str) for version in supported):
        return legacy(f"{described} without a list of supported versions")
    version = shared_version(supported)
    if version is not None and version != asked and not again:
        return version
    if version is not None or any(is_modern(version) for version in supported):
        raise BackendStartError(
            f"{DISCOVER} at {asked} refused; the backend speaks {', '.join(map(clip, supported))} and the "
            f"gateway {', '.join(MODERN_VERSIONS)}"
        )
    return legacy(f"{described}: it names only legacy versions")
