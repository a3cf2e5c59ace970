"""The operators' kit: config/mcp-gateway.service (checked by `systemd-analyze verify` where it exists), the
Dockerfile with its .dockerignore, and config/docker.toml, the image's default config. Docker itself is not
needed: the Dockerfile is parsed and every file it copies is checked to exist and to reach the build."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Final

import pytest
from support import ROOT

from actors.cli import EXIT_CONFIG_ERROR
from actors.config import load_config
from actors.config.errors import ConfigError
from actors.config.schema import GatewaySettings

UNIT: Final = ROOT / "config" / "mcp-gateway.service"
DOCKERFILE: Final = ROOT / "Dockerfile"
DOCKER_CONFIG: Final = ROOT / "config" / "docker.toml"
INSTALLED_AT: Final = "/opt/mcp-gateway/bin/mcp-gateway"  # the unit's ExecStart binary
CONFIG_PATH: Final = "/etc/mcp-gateway/gateway.toml"
INSTRUCTIONS: Final = frozenset(
    [
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
    ]
)

# --- the systemd unit -------------------------------------------------------------------------------------


def parse_unit(text: str) -> dict[str, dict[str, str]]:
    """A unit file's sections and settings (every key here is set once; continuation lines are not used)."""
    sections: dict[str, dict[str, str]] = {}
    section: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        assert not line.endswith("\\"), f"continuation lines are not parsed here: {line}"
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        assert key not in section, f"{key} set twice"
        section[key] = value
    return sections


def test_the_unit_restarts_reloads_and_stops_as_the_gateway_expects() -> None:
    service = parse_unit(UNIT.read_text(encoding="utf-8"))["Service"]
    assert service["ExecStart"] == f"{INSTALLED_AT} serve --config {CONFIG_PATH}"
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == str(EXIT_CONFIG_ERROR)  # a refused config stays down
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGTERM"
    shutdown_s = GatewaySettings().shutdown_s
    assert shutdown_s < float(service["TimeoutStopSec"]) <= shutdown_s + 10
    assert service["User"] not in ("", "root") and service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict" and service["PrivateTmp"] == "yes"
    assert service["StateDirectory"] == service["LogsDirectory"] == "mcp-gateway"  # writable under strict
    assert service["WorkingDirectory"] == "/var/lib/mcp-gateway"
    # control files go only in a folder of the user's alone (runtime/control.py); /tmp is private here
    assert service["RuntimeDirectoryMode"] == "0700"
    assert service["Environment"] == f"XDG_RUNTIME_DIR=/run/{service['RuntimeDirectory']}"


def systemd_analyze_verify(unit: Path) -> list[str]:
    """`systemd-analyze verify`'s complaints about `unit` (lines naming other units are not its business)."""
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    complaints = [line for line in (done.stdout + done.stderr).splitlines() if unit.name in line]
    assert done.returncode == 0 or complaints, f"exit {done.returncode}: {done.stderr}"
    return complaints


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    """verify checks that ExecStart's program exists, and the unit names where an install puts it. So the
    copy verified runs this environment's gateway instead; the shipped file itself may only be faulted for
    that path."""
    text = UNIT.read_text(encoding="utf-8")
    assert text.count(f"ExecStart={INSTALLED_AT} ") == 1
    script = Path(sys.executable).parent / "mcp-gateway"
    here = str(script) if script.exists() else f"{sys.executable} -m actors"
    copy = tmp_path / "mcp-gateway.service"
    copy.write_text(text.replace(f"ExecStart={INSTALLED_AT} ", f"ExecStart={here} "), encoding="utf-8")
    assert systemd_analyze_verify(copy) == []
    if not Path(INSTALLED_AT).exists():
        (complaint,) = systemd_analyze_verify(UNIT)
        assert f"Command {INSTALLED_AT} is not executable" in complaint


# --- the Dockerfile ---------------------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    instructions, pending = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        pending += " " + line.removesuffix("\\").strip()
        if not line.endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
            pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def ignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: `*` and `?` stay within one path segment, `**` crosses."""
    text, regex = pattern.strip("/"), ""
    while text:
        if text.startswith("**/"):
            regex, text = regex + "(?:.*/)?", text[3:]
        elif text.startswith("**"):
            regex, text = regex + ".*", text[2:]
        elif text[0] == "*":
            regex, text = regex + "[^/]*", text[1:]
        elif text[0] == "?":
            regex, text = regex + "[^/]", text[1:]
        else:
            regex, text = regex + re.escape(text[0]), text[1:]
    return re.compile(regex)


def in_build_context(path: str, ignore: list[str]) -> bool:
    """Whether .dockerignore keeps `path`: the last pattern matching it or one of its folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    kept = True
    for line in ignore:
        negated = line.startswith("!")
        pattern = ignore_pattern(line.removeprefix("!"))
        if any(pattern.fullmatch(candidate) for candidate in candidates):
            kept = negated
    return kept


def test_the_dockerfile_uses_known_instructions_and_runs_the_gateway_unprivileged() -> None:
    instructions = dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    assert {keyword for keyword, _ in instructions} <= INSTRUCTIONS
    assert instructions[0] == ("FROM", "python:3.11-slim")
    settings = dict(instructions)  # the last of each
    assert settings["USER"] not in ("root", "0")
    assert [keyword for keyword, _ in instructions].index("USER") < len(instructions) - 3
    assert json.loads(settings["ENTRYPOINT"]) == ["mcp-gateway"]
    assert json.loads(settings["CMD"]) == ["serve", "--config", CONFIG_PATH]
    assert f"MCP_GATEWAY_CONFIG={CONFIG_PATH}" in settings["ENV"].split()  # `token`, `check`: no --config
    listeners = tomllib.loads(DOCKER_CONFIG.read_text(encoding="utf-8"))
    ports = {str(listeners[name]["port"]) for name in ("websocket", "http")}
    assert ports <= set(settings["EXPOSE"].split())
    assert any(keyword == "RUN" and "pip install /src" in arguments for keyword, arguments in instructions)


def test_every_file_the_dockerfile_copies_exists_and_reaches_the_build() -> None:
    ignore = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [args for keyword, args in dockerfile_instructions(DOCKERFILE.read_text()) if keyword == "COPY"]
    sources = [source for args in copies for source in args.split()[:-1] if not source.startswith("--")]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    packages = {"actors", "mcp_gateway_examples"}  # what `pip install .` reads, the demo backends included
    assert {"pyproject.toml", project["readme"], *packages} <= set(sources)
    assert ("config/docker.toml" in sources) and any(args.endswith(f" {CONFIG_PATH}") for args in copies)
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such file"
        files = [path] if path.is_file() else [p for p in path.rglob("*.py") if "__pycache__" not in p.parts]
        assert files, f"COPY {source}: nothing to copy"
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            assert in_build_context(relative, ignore), f".dockerignore leaves out {relative}"
    for private in (".git/config", ".venv/bin/python", "data/notes.sqlite3", "actors/__pycache__/cli.pyc"):
        assert not in_build_context(private, ignore), f".dockerignore lets {private} into the build"


def test_the_images_config_serves_its_demo_backends_behind_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEWAY_JWT_SECRET", raising=False)
    with pytest.raises(ConfigError) as refused:
        load_config(DOCKER_CONFIG)
    assert all("GATEWAY_JWT_SECRET is not set" in str(problem) for problem in refused.value.problems)
    monkeypatch.setenv("GATEWAY_JWT_SECRET", "test-secret")
    config = load_config(DOCKER_CONFIG)
    for listener in (config.websocket, config.http):
        assert listener is not None and listener.host == "0.0.0.0" and listener.auth is not None
    for backend in config.backends:  # the demo backends come with the package `pip install /src` installs
        module = backend.args[1]  # type: ignore[union-attr]
        assert backend.args[0] == "-m" and module.startswith("mcp_gateway_examples.")  # type: ignore[union-attr]
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file()
    assert config.gateway.shutdown_s < 10  # `docker stop` waits 10 s before SIGKILL
