"""The image's recipe for editors (README, Docker section): `serve --stdio` with config/docker-stdio.toml,
which needs no secret and serves stdio alone, so the gateway and its container exit when the editor closes
stdin. Docker itself is not needed: the recipe's arguments after the image name are run as the image's
ENTRYPOINT would run them, on a copy of the config whose state goes to a temporary folder, not the volume."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
import trio
from process_tree import BOUND_S, Gone, descendants_of, end_all
from support import ROOT, RawClient

from actors.config import load_config

EDITOR_MARK: Final = "# for an editor"
IMAGE: Final = "mcp-gateway"


def editor_line() -> str:
    """The README's editor command line (`docker run ...`)."""
    (line,) = [line for line in (ROOT / "README.md").read_text().splitlines() if line.endswith(EDITOR_MARK)]
    return line.removesuffix(EDITOR_MARK).strip()


def editor_recipe() -> list[str]:
    """Its arguments after the image name: what the image's ENTRYPOINT (mcp-gateway) is given."""
    argv = shlex.split(editor_line())
    assert argv[:2] == ["docker", "run"] and "-i" in argv and "--init" in argv
    return argv[argv.index(IMAGE) + 1 :]


def test_the_editor_recipe_names_the_stdio_config_the_image_holds() -> None:
    args = editor_recipe()
    assert args[:2] == ["serve", "--stdio"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"COPY config/docker-stdio.toml {args[args.index('--config') + 1]}\n" in dockerfile
    assert f"#   {editor_line()}\n" in dockerfile  # the Dockerfile's own comment says the same line
    assert editor_line() in (ROOT / "config" / "docker-stdio.toml").read_text()  # and so does the config


def local_copy(tmp_path: Path) -> Path:
    text = (ROOT / "config" / "docker-stdio.toml").read_text()
    text = text.replace("/var/lib/mcp-gateway/", f"{tmp_path}/")  # the image's volume
    copy = tmp_path / "stdio.toml"
    copy.write_text(text)
    return copy


def test_the_stdio_config_needs_no_secret_and_opens_no_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATEWAY_JWT_SECRET", raising=False)
    config = load_config(local_copy(tmp_path))
    assert config.websocket is None and config.http is None and config.admin is None
    assert [backend.name for backend in config.backends] == ["notes", "utility"]


async def test_the_editor_recipe_serves_and_exits_at_the_end_of_stdin_leaving_nothing(tmp_path: Path) -> None:
    args = editor_recipe()
    args[args.index("--config") + 1] = str(local_copy(tmp_path))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}  # no secret
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "actors", *args], stdin=-1, stdout=-1, stderr=subprocess.DEVNULL, env=env
    )
    gone = Gone([])
    try:
        gateway = RawClient(process)
        assert "result" in await gateway.initialize()
        await gateway.call("sum", "calculate", expression="6*7")
        assert "42" in str((await gateway.answer_to("sum"))["result"])
        gone = Gone(descendants_of(process.pid))
        assert len(gone.procs) == 2  # its two backends
        async with trio.open_nursery() as nursery:
            await gateway.close_stdin()
            gone.start(nursery)
        assert gone.after_s is not None and gone.after_s <= BOUND_S
        assert await gateway.wait_exit() == 0
    finally:
        await end_all(process, gone)
