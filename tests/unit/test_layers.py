"""The layers of actors/ (docs/architecture.md, "The layers"): a package imports only from layers below its
own, never from a higher one nor from a peer on its own layer. Read from the source with ast, so an import
inside a function or under TYPE_CHECKING counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

import actors

ACTORS: Final = Path(actors.__file__).parent
# Bottom first. Packages on one line are peers: neither imports the other.
LAYERS: Final = (
    ("runtime", "protocol"),  # the runtime knows no MCP; the wire knows no supervisor
    ("policy", "limits", "trust", "output", "discovery"),  # pure rules, buckets, digests, result limits,
    # the search index: judged above
    ("config",),
    ("sandbox", "supply"),  # a stdio backend's sandbox (probe, plan, launch) and its pins: known to backends
    ("framing",),
    ("telemetry",),  # meters and traces: written by everything above, read by admin and exporters
    ("catalog", "middleware"),
    ("routes",),  # [[routes]]: views of the catalog, one per route
    ("identity",),
    ("backends", "session"),  # they talk only by messages (protocol/envelopes.py)
    ("fleet",),  # replicas sharing sessions, limits and notices through Redis
    ("frontends",),
    ("admin",),
)
ROOT: Final = "the root"  # the modules directly in actors/ (gateway, reload, the CLI): may import anything
VERSION: Final = "actors"  # actors/__init__.py: the version alone; anyone may read it, it imports nothing
RANK: Final = {package: rank for rank, peers in enumerate(LAYERS) for package in peers}
# (importing module, imported module) pairs allowed against the rule, each with the reason on its line.
EXCEPTIONS: Final[frozenset[tuple[str, str]]] = frozenset()


def layer_of(module: str) -> str:
    """The layer of a module named `actors....`: its package under actors/, ROOT or VERSION."""
    parts = module.split(".")
    if len(parts) == 1:
        return VERSION
    if (ACTORS / parts[1]).is_dir():
        return parts[1]
    return ROOT


def package_of(module: str) -> str:
    """The package a relative import in `module` starts from: itself when it is a package (an __init__)."""
    return module if ACTORS.joinpath(*module.split(".")[1:]).is_dir() else module.rpartition(".")[0]


def imports_of(module: str, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every module of actors/ that `module` imports, anywhere in it, with the line."""
    package = package_of(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names if alias.name.startswith("actors"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "actors":  # `from actors import x`: the module x when there is one, else the version
                for alias in node.names:
                    named = ACTORS / alias.name
                    is_module = named.is_dir() or named.with_suffix(".py").exists()
                    yield node.lineno, f"actors.{alias.name}" if is_module else "actors"
            elif base.startswith("actors."):
                yield node.lineno, base


def violations(module: str, source: str) -> list[str]:
    """Each import of `module` (its text `source`) that the layers forbid, said in one line."""
    importer, found = layer_of(module), []
    for line, target in imports_of(module, ast.parse(source)):
        imported = layer_of(target)
        if imported == VERSION and importer != VERSION:
            continue
        if importer == ROOT or imported == importer or (module, target) in EXCEPTIONS:
            continue
        below, rank = RANK.get(imported), RANK.get(importer)
        if below is not None and rank is not None and below < rank:
            continue
        if not {importer, imported} <= {VERSION, ROOT, *RANK}:
            why = "a package in no layer"
        else:
            why = "a peer" if below is not None and below == rank else "a higher layer"
        found.append(f"{module}:{line} ({importer}) imports {target}: {why} ({imported})")
    return found


def module_name(path: Path) -> str:
    parts = ["actors", *path.relative_to(ACTORS).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_package_of_actors_has_a_layer() -> None:
    packages = {path.parent.name for path in ACTORS.glob("*/__init__.py")}
    assert packages - RANK.keys() == set(), "add it to LAYERS here and to docs/architecture.md"
    assert RANK.keys() - packages == set(), "a layer names a package that is gone"


def test_no_package_imports_a_higher_layer_or_a_peer() -> None:
    found = [
        problem
        for path in sorted(ACTORS.rglob("*.py"))
        for problem in violations(module_name(path), path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("actors.protocol.errors", "from actors.runtime.supervisor import ChildExitError"),  # a peer
        ("actors.runtime.control", "from actors.reload import ReloadOutcome"),  # the root
        ("actors.session.forward", "from actors.backends.connection import answer"),  # a peer
        ("actors.backends.actor", "def f():\n    from actors.admin import status\n"),  # in a function
        ("actors.catalog.view", "if TYPE_CHECKING:\n    import actors.session.session\n"),  # for types only
        ("actors.config.load", "from ..telemetry import meters"),  # relative
        ("actors.protocol", "from . import codec\nfrom ..framing.lines import read_lines"),  # an __init__
        ("actors", "from actors.runtime import log"),  # the version imports nothing
    ],
)
def test_the_check_sees_each_form_of_an_import_that_reaches_up(module: str, source: str) -> None:
    assert len(violations(module, source)) == 1


def test_the_check_lets_an_import_down_and_the_version_through() -> None:
    assert violations("actors.session.forward", "from actors.protocol.envelopes import Call") == []
    assert violations("actors.backends.era", "from actors import __version__") == []
    assert violations("actors.gateway", "from actors.admin.service import Admin") == []
    assert violations("actors.telemetry.meters", "from actors.policy import PolicyGate") == []
