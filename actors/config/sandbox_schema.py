"""[sandbox] and [backends.sandbox]: what a stdio backend may read, write and reach (actors/sandbox/).

The top-level table is the default of every stdio backend; a backend's own table sets only the keys it names
(the rest come from the top level, then from SandboxTable's defaults). Paths are absolute, start with `~`
(the gateway user's home), or start with a placeholder: {runtime} (the interpreter or program and its
libraries), {workdir} (the backend's cwd), {tmp} (a private folder made for each run).
"""

from __future__ import annotations

import enum
import pwd
import re
from typing import Final

import attrs
from attrs.validators import optional

from actors.config.checks import Validator, every, rule

PLACEHOLDERS: Final = ("{runtime}", "{workdir}", "{tmp}")
MAX_PATHS: Final = 64  # per list: each is a bind and a Landlock rule
MAX_PATH_CHARS: Final = 4096  # PATH_MAX
MAX_MEMORY_MB: Final = 1 << 20  # 1 TiB
MAX_TASKS: Final = 1 << 16
MAX_NOFILE: Final = 1 << 20  # the kernel's default nr_open
USER_PATTERN: Final = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\$?|[0-9]{1,10}")


class SandboxMode(enum.StrEnum):
    OFF = "off"  # run as before: the gateway's rights
    AUTO = "auto"  # enforce what this kernel allows; one DEGRADED line names what it cannot
    REQUIRE = "require"  # start only when every rule is enforced; else state sandbox_unavailable


class SandboxNetwork(enum.StrEnum):
    NONE = "none"  # no socket but unix ones (a network namespace, else seccomp and Landlock)
    HOST = "host"  # the host's network, as unsandboxed


def path_problem(path: str) -> str | None:
    """Why a `read`, `write` or `hide` entry cannot be used, or None."""
    if not path or len(path) > MAX_PATH_CHARS:
        return f"must be 1 to {MAX_PATH_CHARS} characters"
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        return f"{path!r} has a control character"
    if "{" in path or "}" in path:
        head = path.split("/", 1)[0]
        if head.startswith("{") and head.endswith("}") and head not in PLACEHOLDERS:
            return f"{path!r}: unknown placeholder {head} (known: {', '.join(PLACEHOLDERS)})"
        if head not in PLACEHOLDERS or "{" in path[len(head) :] or "}" in path[len(head) :]:
            return f"{path!r}: a placeholder ({', '.join(PLACEHOLDERS)}) may only start the path"
        return None
    if not path.startswith(("/", "~")):
        return f"{path!r} must be absolute, start with ~ or with a placeholder ({', '.join(PLACEHOLDERS)})"
    if path.startswith("~") and not (path == "~" or path.startswith("~/")):
        return f"{path!r}: only ~ (the gateway user's home) is understood, not ~user"
    if "/../" in f"{path}/":
        return f"{path!r} must not contain '..'"
    return None


def _path_rule(_instance: object, _attribute: object, path: str) -> None:
    problem = path_problem(path)
    if problem:
        raise ValueError(problem)


def _user_exists(name: str) -> bool:
    if not USER_PATTERN.fullmatch(name):
        return False
    try:
        pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        return False
    return True


def at_most(highest: int) -> Validator:
    return rule(lambda value: value <= highest, f"must be {highest} or less")


paths: Final = [
    rule(lambda items: len(items) <= MAX_PATHS, f"at most {MAX_PATHS} paths"),
    every(_path_rule),
]


@attrs.frozen(kw_only=True)
class SandboxTable:
    """[sandbox] or [backends.sandbox] as written: None is "not set here"."""

    mode: SandboxMode | None = None
    read: tuple[str, ...] | None = attrs.field(default=None, validator=optional(paths))
    write: tuple[str, ...] | None = attrs.field(default=None, validator=optional(paths))
    hide: tuple[str, ...] | None = attrs.field(default=None, validator=optional(paths))
    network: SandboxNetwork | None = None
    memory_mb: int | None = attrs.field(
        default=None,
        validator=optional([rule(lambda mb: mb >= 16, "must be 16 or more"), at_most(MAX_MEMORY_MB)]),
    )
    tasks: int | None = attrs.field(
        default=None,
        validator=optional([rule(lambda n: n >= 1, "must be 1 or more"), at_most(MAX_TASKS)]),
    )
    nofile: int | None = attrs.field(
        default=None,
        validator=optional([rule(lambda n: n >= 16, "must be 16 or more"), at_most(MAX_NOFILE)]),
    )
    # a user name or uid the backend runs as; honoured when the gateway runs as root
    user: str | None = attrs.field(
        default=None, validator=optional(rule(_user_exists, "{value!r}: no such user on this machine"))
    )


@attrs.frozen(kw_only=True)
class SandboxSettings:
    """One backend's sandbox, every key decided (its table over [sandbox] over these defaults)."""

    mode: SandboxMode = SandboxMode.OFF
    read: tuple[str, ...] = ("{runtime}",)
    write: tuple[str, ...] = ("{workdir}", "{tmp}")
    hide: tuple[str, ...] = ()
    network: SandboxNetwork = SandboxNetwork.NONE
    memory_mb: int | None = 2048  # memory.max where cgroup v2 is delegated; RLIMIT_DATA (not RLIMIT_AS: Node)
    tasks: int | None = 256  # pids.max where delegated; else RLIMIT_NPROC, only under a uid of its own
    nofile: int | None = 1024
    user: str | None = None


def sandbox_settings(*tables: SandboxTable | None) -> SandboxSettings:
    """The tables merged, the first that sets a key winning (a backend's, then [sandbox])."""
    chosen: dict[str, object] = {}
    for field in attrs.fields(SandboxTable):
        for table in tables:
            value = getattr(table, field.name) if table is not None else None
            if value is not None:
                chosen[field.name] = value
                break
    return SandboxSettings(**chosen)  # type: ignore[arg-type]
