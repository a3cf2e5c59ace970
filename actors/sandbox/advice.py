"""What `mcp-gateway check` says of each stdio backend's sandbox on this machine: a `require` it cannot
meet (the backend would stay down as sandbox_unavailable: a problem, exit 2) and an `auto` that would run
DEGRADED (a warning), each as `FILE: backends[N].sandbox: reason`."""

from __future__ import annotations

from collections.abc import Iterator

from actors.config.sandbox_schema import SandboxMode
from actors.config.schema import Config
from actors.sandbox.plan import plan
from actors.sandbox.probe import primitives


def sandbox_advice(config: Config) -> Iterator[tuple[bool, str]]:
    """(is_problem, line) per stdio backend whose sandbox is not whole here; the probe runs only when a
    backend's sandbox is on."""
    for index, backend in enumerate(config.backends):
        settings = config.sandbox_of(backend)
        if settings is None or settings.mode is SandboxMode.OFF:
            continue
        chosen = plan(settings, primitives())
        if not chosen.missing:
            continue
        missing = ",".join(chosen.missing)
        where = f"{config.path}: backends[{index}].sandbox"
        if settings.mode is SandboxMode.REQUIRE:
            yield True, f"{where}: mode=require but this machine cannot enforce {missing}; it would not start"
        else:
            yield False, f"{where}: mode=auto runs DEGRADED here, missing={missing}"
