"""Where the sandbox shows: the status JSON (admin, the status page) carries each backend's report (mode,
engines per rule, what is missing, the probe), `mcp-gateway status` prints it in one line, and a backend
left down by `require` says sandbox_unavailable with its reason."""

from __future__ import annotations

from catalog_double import make_catalog, make_model, ready, tell

from actors.admin.status_command import format_tree
from actors.backends.sandboxing import SandboxUnavailableError
from actors.runtime.supervisor import ChildStopped

REPORT = {
    "mode": "auto",
    "engines": ["bwrap", "landlock", "rlimits"],
    "enforced": {"read": ["bwrap", "landlock"], "tasks": []},
    "missing": ["tasks"],
    "primitives": {"root": True},
}


async def test_the_status_tree_shows_each_backends_sandbox() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog)
    tell(catalog, ready("alpha", "echo"))
    model.meters.backend("alpha").sandbox = REPORT
    reason = "sandbox_unavailable: mode=require but cannot enforce tasks: tasks needs a uid of its own"
    tell(catalog, ChildStopped("beta", SandboxUnavailableError(reason)))
    model.meters.backend("beta").sandbox = {**REPORT, "mode": "require"}
    tree = model.status()
    alpha, beta = tree["backends"]
    assert alpha["sandbox"] == REPORT
    assert beta["state"] == "sandbox_unavailable" and beta["reason"] == reason
    printed = format_tree(tree)
    assert "sandbox auto: bwrap,landlock,rlimits; missing tasks" in printed
    assert f"beta: sandbox_unavailable ({reason})" in printed
