"""[trust]: every backend's trust in what it advertises (actors/trust/), and where the baselines are kept.

A backend's own `trust` key overrides `mode`. The baselines live in `path`, an SQLite file (by default
`trust.sqlite3` beside the [audit] file, else beside the config file); with a [fleet] table they live in
Redis instead, shared by every replica, and `path` is not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import attrs

from actors.trust import TrustMode

DEFAULT_FILE: Final = "trust.sqlite3"


@attrs.frozen(kw_only=True)
class TrustSettings:
    """[trust]."""

    mode: TrustMode = TrustMode.OFF  # for every backend without a `trust` key of its own
    path: Path | None = None  # relative to the config file's folder; None: beside the audit, or the config


def resolve_trust(trust: TrustSettings, folder: Path, audit_file: Path | None) -> TrustSettings:
    """`path` made absolute: as written, relative to the config's folder; else beside the audit file, else
    beside the config."""
    if trust.path is not None:
        return attrs.evolve(trust, path=(folder / trust.path.expanduser()).resolve())
    beside = audit_file.parent if audit_file is not None else folder
    return attrs.evolve(trust, path=beside / DEFAULT_FILE)
