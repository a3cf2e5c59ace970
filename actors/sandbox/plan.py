"""Which engine enforces which rule of a backend's sandbox, given what the probe found: a pure function, so
each cell of the matrix (root or not, userns or not, Landlock or not) is a unit test."""

from __future__ import annotations

import pwd
from typing import Any, Final

import attrs

from actors.config.sandbox_schema import SandboxMode, SandboxNetwork, SandboxSettings
from actors.sandbox.probe import Primitives

# rule -> the engines that enforce it, in the order they are preferred
RULES: Final = ("read", "write", "hide", "network", "memory", "tasks", "nofile", "user", "env")


@attrs.frozen(kw_only=True)
class Plan:
    mode: SandboxMode
    engines: tuple[str, ...]  # used: bwrap, landlock, seccomp, cgroup, rlimits, uid
    enforced: dict[str, tuple[str, ...]]  # rule -> engines enforcing it
    missing: tuple[str, ...]  # rules asked for that nothing here enforces
    uid: int | None  # the uid to run as (None: the gateway's)
    gid: int | None

    @property
    def use_bwrap(self) -> bool:
        return "bwrap" in self.engines

    @property
    def use_landlock(self) -> bool:
        return "landlock" in self.engines

    @property
    def use_seccomp(self) -> bool:
        return "seccomp" in self.engines

    @property
    def use_cgroup(self) -> bool:
        return "cgroup" in self.engines

    def as_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "engines": list(self.engines),
            "enforced": {rule: list(engines) for rule, engines in self.enforced.items()},
            "missing": list(self.missing),
        }


def _user_ids(user: str | None) -> tuple[int, int] | None:
    if user is None:
        return None
    entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def plan(settings: SandboxSettings, found: Primitives) -> Plan:
    """The engines for `settings` on a machine where the probe found `found`."""
    ids = _user_ids(settings.user) if found.root else None
    bwrap, landlock = found.bwrap.ok, found.landlock_abi >= 1
    seccomp = found.seccomp.ok and settings.network is SandboxNetwork.NONE and not bwrap
    fs = tuple(name for name, ok in (("bwrap", bwrap), ("landlock", landlock)) if ok)
    enforced: dict[str, tuple[str, ...]] = {"read": fs, "write": fs, "hide": fs, "env": ("launcher",)}
    if settings.network is SandboxNetwork.NONE:
        # a network namespace, else seccomp (no AF_INET/AF_INET6 socket); Landlock alone covers TCP only
        enforced["network"] = ("bwrap",) if bwrap else (("seccomp",) if seccomp else ())
    # a cgroup of the run's own where v2 is delegated (cgroup.py): memory.max and pids.max, as root too
    cgroup = found.cgroup_v2.ok and (settings.memory_mb is not None or settings.tasks is not None)
    by_cgroup = ("cgroup",) if cgroup else ()
    if settings.memory_mb is not None:
        enforced["memory"] = (*by_cgroup, "rlimits")
    if settings.nofile is not None:
        enforced["nofile"] = ("rlimits",)
    runs_as_root = (ids[0] == 0) if ids is not None else found.root
    if settings.tasks is not None:
        # RLIMIT_NPROC never binds uid 0; under another uid it counts per user namespace
        enforced["tasks"] = (*by_cgroup, *(() if runs_as_root else ("rlimits",)))
    if settings.user is not None:
        enforced["user"] = ("uid",) if ids is not None else ()
    used = [
        *fs,
        *(["seccomp"] if seccomp else []),
        *by_cgroup,
        "rlimits",
        *(["uid"] if ids is not None else []),
    ]
    missing = tuple(rule for rule in RULES if rule in enforced and not enforced[rule])
    return Plan(
        mode=settings.mode,
        engines=tuple(used),
        enforced=enforced,
        missing=missing,
        uid=ids[0] if ids is not None else None,
        gid=ids[1] if ids is not None else None,
    )
