"""What `mcp-gateway check` says of pins: an `npx`/`uvx` backend the lock file does not name installs
whatever its registry serves at each start; a backend the lock names but for other arguments will be refused
at its spawn. Warnings (`FILE: backends[N].command: warning: reason`), never a failed check; a lock file that
cannot be read is a problem, as a start would refuse every backend it should pin."""

from __future__ import annotations

from pathlib import Path

from actors.config.backend_schema import StdioBackend
from actors.config.errors import ConfigProblem
from actors.config.schema import Config
from actors.supply.kinds import kind_of
from actors.supply.lockfile import lock_path, read_lock


def pin_advice(config: Config) -> list[ConfigProblem]:
    """The warnings for `config`'s stdio backends, in file order (ConfigError: the lock cannot be read)."""
    lock = lock_path(config.path)
    entries = read_lock(lock)
    found = []
    for index, backend in enumerate(config.backends):
        if not isinstance(backend, StdioBackend):
            continue
        entry = entries.get(backend.name)
        key = f"backends[{index}].command"
        argv = (backend.command, *backend.args)
        if entry is None and kind_of(backend.command) != "exec":
            reason = (
                f"warning: {Path(backend.command).name} installs {backend.name}'s package from its registry"
                f" at every start, unpinned: run `mcp-gateway prepare {backend.name}` to pin its version"
                f" and digest in {lock.name}"
            )
            found.append(ConfigProblem(str(config.path), key, reason))
        elif entry is not None and entry.argv != argv:
            reason = (
                f"warning: {lock.name} pins {backend.name} for {list(entry.argv)}, not {list(argv)}: it will"
                f" be refused (pin_mismatch) until `mcp-gateway prepare {backend.name}`"
            )
            found.append(ConfigProblem(str(config.path), key, reason))
    return found
