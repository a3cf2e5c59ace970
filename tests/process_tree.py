"""A gateway's process tree, for the shutdown tests: a config whose backends each start a grandchild (some
backends and grandchildren deaf to stdin's end and to SIGTERM), the gateway's descendants noted while they
run, and how long after a moment the last of them was gone (watched while they are being ended, so that
what comes after, the gateway's own exit included, does not count)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import attrs
import trio
from support import DEADLINE_S, backend_entry, kill_quietly, write_config

from actors.backends import descendants

BOUND_S: Final = 1.5  # every backend and its descendants gone within this of the end of the gateway's stdin
GONE_POLL_S: Final = 0.01  # no event tells the exit of a process that is not our child: /proc is polled
# (public tool name, arguments): a grandchild under each backend of `family_config`, each leaving more behind.
GRANDCHILDREN: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    ("spawn_child", {}),  # in its backend's process group
    ("deaf__spawn_child", {"setsid": True, "ignore_sigterm": True}),  # its own session, SIGTERM-proof
    ("stubborn__spawn_child", {"double_fork": True, "setsid": True, "ignore_sigterm": True}),  # orphaned
)


def family_config(tmp_path: Path, **gateway: Any) -> Path:
    """Three backends: a polite one, one that ignores the end of its stdin, one that ignores SIGTERM too."""
    return write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("polite", "--only=spawn_child,sleep"),
            backend_entry("deaf", "--only=spawn_child", "--ignore-stdin-eof"),
            backend_entry("stubborn", "--only=spawn_child", "--ignore-stdin-eof", "--ignore-sigterm"),
        ],
        **gateway,
    )


def child_running(config: Path) -> int:
    """The pid of this process's child that serves `config` (a gateway the SDK client started)."""
    for pid in descendants.children(os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(config).encode() in argv:
            return pid
    raise AssertionError(f"no child of this process serves {config}")


def descendants_of(pid: int) -> list[descendants.Proc]:
    """Every process `pid` started, with those they started (re-parented ones included: the gateway is
    their subreaper), as they are now."""
    family = descendants.Family(pid)
    family.note()
    procs = [descendants.stat(p) for p in family.seen]
    return [proc for proc in procs if proc is not None and not proc.exited]


@attrs.define
class Gone:
    """When the last of `procs` ended, in seconds after `since`: run `watch` beside what ends them."""

    procs: list[descendants.Proc]
    since: float = attrs.field(factory=trio.current_time)
    after_s: float | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Watch from now on, in `nursery`."""
        self.since = trio.current_time()
        nursery.start_soon(self.watch)

    async def watch(self) -> None:
        with trio.fail_after(DEADLINE_S):
            while descendants.still_running(self.procs):  # noqa: ASYNC110 (no event exists: GONE_POLL_S)
                await trio.sleep(GONE_POLL_S)
        self.after_s = trio.current_time() - self.since


async def end_all(process: trio.Process, gone: Gone) -> None:
    """Whatever a failed test left running: the noted descendants, and the process itself."""
    kill_quietly(p.pid for p in gone.procs)
    if process.returncode is None:
        process.kill()
        await process.wait()
