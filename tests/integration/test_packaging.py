"""Installing: a fresh clone's `scripts/bootstrap serve` installs what serving needs and says so; the wheel
alone (no extras), in that venv, runs `mcp-gateway`, imports every module of `actors` and checks configs
with each kind of backend; the default configs, copied where the systemd recipe puts them, check and serve
the demo backends (shipped in the wheel) from another folder; config/stdio.toml, the editors' config, has
the default backends and no listener.

The install tests are marked `slow` (about 25 s: an install of the runtime dependencies, from pip's cache
once it is warm, and a wheel build); they run by default, and `-m "not slow"` leaves them out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Final

import attrs
import pytest
import trio
from mcp import Client, StdioServerParameters
from support import DEADLINE_S, LEGACY_ERA, ROOT

from actors.cli import main

STEP_S: Final = 300.0  # one build or install step; a cold pip cache downloads the dependencies
IMPORT_ALL: Final = (
    "import importlib, pkgutil, actors\n"
    "walk = pkgutil.walk_packages(actors.__path__, 'actors.')\n"
    "names = [m.name for m in walk if m.name != 'actors.__main__']  # which runs the CLI\n"
    "[importlib.import_module(name) for name in names]\n"
    "print(len(names), actors.__file__)"
)
EVERY_TRANSPORT: Final = """
[[backends]]
name = "local"
command = "python"
args = ["-c", "pass"]

[[backends]]
name = "socket"
url = "ws://127.0.0.1:9/mcp"

[[backends]]
name = "web"
url = "http://127.0.0.1:9/mcp"
"""


def run(args: list[str | Path], cwd: Path, extra_env: dict[str, str] | None = None) -> str:
    """Run a step outside the repository (so `actors` can only come from the venv); its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra_env or {})
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_S,
        check=False,
    )
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@attrs.frozen
class Installed:
    clone: Path  # a copy of the working tree, as a fresh clone holds it
    bootstrapped: subprocess.CompletedProcess[str]  # its `scripts/bootstrap serve`
    venv: Path  # that venv, its project then replaced by the wheel built from the copy


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh clone's `scripts/bootstrap serve` (what `scripts/serve` runs first): a venv with the runtime
    dependencies alone. The project in it is then replaced by the wheel of the working tree (built from the
    copy, so the build leaves no build/ or *.egg-info in the repository): the wheel alone, no extras. One
    install of the dependencies serves both, the slowest step of this file."""
    clone = tmp_path_factory.mktemp("packaging") / "clone"
    for folder in ("actors", "mcp_gateway_examples", "scripts", "config"):
        shutil.copytree(ROOT / folder, clone / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, clone / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    bootstrapped = subprocess.run(
        [clone / "scripts" / "bootstrap", "serve"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_S,
        check=False,
    )
    assert bootstrapped.returncode == 0, bootstrapped.stderr
    python = clone / ".venv" / "bin" / "python"
    work = clone.parent
    run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", work / "dist", clone], work)
    (wheel,) = (work / "dist").glob("*.whl")
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel], work)
    shutil.rmtree(clone / "build", ignore_errors=True)
    return Installed(clone, bootstrapped, clone / ".venv")


@pytest.fixture(scope="module")
def venv(installed: Installed) -> Path:
    return installed.venv


@pytest.mark.slow
def test_the_wheel_alone_runs_and_imports_every_module(venv: Path, tmp_path: Path) -> None:
    assert "serve" in run([venv / "bin" / "mcp-gateway", "--help"], tmp_path)
    assert "serve" in run([venv / "bin" / "python", "-m", "actors", "--help"], tmp_path)
    count, location = run([venv / "bin" / "python", "-c", IMPORT_ALL], tmp_path).split()
    assert int(count) > 30 and Path(location).is_relative_to(venv)  # the installed copy, not the tree
    config = tmp_path / "every-transport.toml"
    config.write_text(EVERY_TRANSPORT)
    assert run([venv / "bin" / "mcp-gateway", "check", "--config", config], tmp_path).endswith(
        "ok (3 backends)\n"
    )


def install_config(name: str, etc: Path, port: int | None = None) -> Path:
    """config/NAME copied where the systemd recipe puts it (`install -D ... /etc/mcp-gateway/gateway.toml`),
    with its listeners' ports set to `port` (0: any free one) so the test shares no port with anything."""
    text = (ROOT / "config" / name).read_text(encoding="utf-8")
    if port is not None:
        text = re.sub(r"(?m)^port = \d+", f"port = {port}", text)
    installed = etc / "mcp-gateway" / "gateway.toml"
    installed.parent.mkdir(parents=True)
    installed.write_text(text, encoding="utf-8")
    return installed


@pytest.mark.slow
def test_the_stdio_config_serves_its_backends_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    """What an editor runs after `pipx install .`: the demo backends come with the wheel and need nothing
    but the runtime dependencies (they run on the gateway's own interpreter), started from any folder."""
    config = install_config("stdio.toml", tmp_path / "etc")
    env = {"HOME": str(tmp_path / "home")}  # the notes database goes to ~/.local/state
    out = run([venv / "bin" / "mcp-gateway", "tools", "--config", config], Path("/"), env)
    assert "search" in out and "utility__search" in out and "add_note" in out


@pytest.mark.slow
async def test_the_default_config_installed_as_the_recipe_says_checks_and_serves_from_another_folder(
    venv: Path, tmp_path: Path
) -> None:
    """The systemd recipe: the wheel installed, config/gateway.toml copied to /etc/mcp-gateway, the gateway
    started in another folder (/ here; the unit's WorkingDirectory in production). `check` passes, and
    the demo backends serve: notes writes its database under HOME, not beside the config."""
    config = install_config("gateway.toml", tmp_path / "etc", port=0)
    home = tmp_path / "home"
    checked = run([venv / "bin" / "mcp-gateway", "check", "--config", config], Path("/"), {"HOME": str(home)})
    assert checked == f"{config}: ok (2 backends)\n"
    params = StdioServerParameters(
        command=str(venv / "bin" / "mcp-gateway"),
        args=["serve", "--stdio", "--config", str(config)],
        cwd="/",
        env={"HOME": str(home), "PATH": os.environ.get("PATH", "")},
    )
    with trio.fail_after(DEADLINE_S):
        async with Client(params, mode=LEGACY_ERA) as client:
            listed = await client.list_tools()
            assert {"add_note", "search", "utility__search", "calculate"} <= {t.name for t in listed.tools}
            added = await client.call_tool("add_note", {"title": "installed", "body": "from /"})
            assert not added.is_error
            found = await client.call_tool("search", {"query": "installed"})
            assert "installed" in str(found.content)
    assert (home / ".local" / "state" / "mcp-gateway" / "notes.sqlite3").is_file()
    assert not (config.parent / "notes.sqlite3").exists()


def test_the_stdio_config_has_the_default_backends_and_no_listener(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stdio = tomllib.loads((ROOT / "config" / "stdio.toml").read_text())
    default = tomllib.loads((ROOT / "config" / "gateway.toml").read_text())
    assert "websocket" not in stdio and "http" not in stdio
    assert stdio["backends"] == default["backends"] and stdio["gateway"] == default["gateway"]
    assert main(["check", "--config", str(ROOT / "config" / "stdio.toml")]) == 0
    assert capsys.readouterr().out.endswith("stdio.toml: ok (2 backends)\n")


def test_no_built_package_is_tracked_and_build_output_is_ignored() -> None:
    """A wheel or sdist in the repository would be installed by someone, stale (a pyjwt wheel once was)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "*.whl", "*.tar.gz", "*.egg"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout == ""
    ignored = subprocess.run(
        ["git", "check-ignore", "build/x", "dist/x"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert ignored.stdout.split() == ["build/x", "dist/x"]


@pytest.mark.slow
def test_scripts_serve_installs_only_what_serving_needs_and_shows_its_progress(installed: Installed) -> None:
    # A fresh clone's first `scripts/serve` once sat silent for ~90 s installing the test extras too.
    done, clone = installed.bootstrapped, installed.clone
    assert done.stdout == ""
    assert "scripts/bootstrap: installing the project (serve)" in done.stderr
    assert "Successfully installed" in done.stderr  # pip's own lines, as they come
    python = installed.venv / "bin" / "python"
    for test_only in ("pytest", "mcp", "hypothesis"):
        probe = subprocess.run([python, "-c", f"import {test_only}"], capture_output=True, check=False)
        assert probe.returncode != 0, f"{test_only} was installed to serve"
    run([installed.venv / "bin" / "mcp-gateway", "check", "--config", "config/gateway.toml"], clone)
    again = subprocess.run(
        [clone / "scripts" / "bootstrap", "serve"], capture_output=True, text=True, timeout=STEP_S, check=True
    )
    assert again.stderr == ""  # installed: nothing to say, nothing to do
