"""Supply-chain pins end to end, through the real CLI and real backend processes, offline: a script backend
prepared (its sha256 in the lock), started, changed (refused as pin_mismatch, once, with both digests),
prepared again (started); an npx backend installed by `prepare` from a local tarball (`npm pack`), run
offline from its cache, and refused once its installed files are altered."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Final

import pytest
import trio
from support import DEADLINE_S, write_config

from actors.catalog import CatalogView
from actors.cli import main
from actors.config.load import load_config
from actors.gateway import Gateway
from actors.runtime.watch import Watch
from actors.supply import pinned
from actors.supply.digest import file_sha256

# A stdio MCP server of the handshake era in a few lines of stdlib: initialize, tools/list, ping.
SERVER: Final = """\
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    results = {
        "initialize": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "pinned", "version": "1"}},
        "tools/list": {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]},
        "ping": {},
    }
    out = {"jsonrpc": "2.0", "id": m["id"]}
    if m["method"] in results:
        out["result"] = results[m["method"]]
    else:
        out["error"] = {"code": -32601, "message": "not here"}
    print(json.dumps(out), flush=True)
"""
NODE_SERVER: Final = """\
#!/usr/bin/env node
const answers = {
  initialize: {
    protocolVersion: "2025-06-18", capabilities: {tools: {}}, serverInfo: {name: "tiny", version: "1"},
  },
  "tools/list": {tools: [{name: "tiny_hello", inputSchema: {type: "object"}}]},
  ping: {},
};
require("readline").createInterface({input: process.stdin}).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  const error = {code: -32601, message: "not here"};
  const out = m.method in answers ? {result: answers[m.method]} : {error};
  process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: m.id, ...out}) + "\\n");
});
"""


def backend_line(out: str, name: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith(f"backend {name}: ")]
    return line


def test_a_script_backend_starts_only_as_prepared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script, config = script_backend(tmp_path)
    lock = tmp_path / "gateway.lock.toml"

    assert main(["prepare", "script", "--config", str(config)]) == 0
    prepared = file_sha256(script)
    assert f"prepared script: server.py {prepared}" in capsys.readouterr().out
    assert tomllib.loads(lock.read_text())["backends"]["script"] == {
        "kind": "exec",
        "argv": ["./server.py"],
        "files": {str(script): prepared},
    }
    assert main(["tools", "--config", str(config)]) == 0
    assert backend_line(capsys.readouterr().out, "script") == "backend script: ready, 1 tools, eras legacy"

    script.write_text(script.read_text() + "# changed after prepare\n")
    assert main(["tools", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    reason = f"{script}: expected {prepared}, found {file_sha256(script)} (lock {lock})"
    assert backend_line(captured.out, "script") == (
        f"backend script: pin_mismatch ({reason}; if the change is yours, run `mcp-gateway prepare script`)"
    )
    assert "a restart cannot mend it leaves it down" in captured.err and reason in captured.err
    assert "restarting in" not in captured.err and "started process" not in captured.err

    assert main(["prepare", "script", "--config", str(config)]) == 0
    assert main(["tools", "--config", str(config)]) == 0
    assert backend_line(capsys.readouterr().out, "script").startswith("backend script: ready")


def script_backend(folder: Path) -> tuple[Path, Path]:
    """An executable script backend and a config running it: (script, config)."""
    script = folder / "server.py"
    script.write_text(f"#!{sys.executable} -IS\n{SERVER}")
    script.chmod(0o755)
    return script, write_config(folder / "gateway.toml", [{"name": "script", "command": "./server.py"}])


async def state_of(watch: Watch[CatalogView], name: str, wanted: str) -> str:
    """Wait until backend `name` has left starting and restarting; its state then (`wanted` ends the wait)."""
    with trio.fail_after(DEADLINE_S):
        version, view = watch.version, watch.value
        while view.backends[name].state.value != wanted:
            version, view = await watch.wait_newer(version)
    return view.backends[name].describe()


async def test_a_reload_after_prepare_starts_a_backend_left_pin_mismatch(tmp_path: Path) -> None:
    script, config = script_backend(tmp_path)
    assert main(["prepare", "script", "--config", str(config)]) == 0
    script.write_text(script.read_text() + "# changed after prepare\n")
    gateway = Gateway(load_config(config))
    async with trio.open_nursery() as nursery:
        watch = await nursery.start(lambda task_status: gateway.run(task_status=task_status))
        assert "found " + file_sha256(script) in await state_of(watch, "script", "pin_mismatch")
        assert main(["prepare", "script", "--config", str(config)]) == 0
        outcome = await gateway.reload("a test")
        assert outcome.lines[0] == "restarted script; 0 backends untouched"
        assert await state_of(watch, "script", "ready") == "ready"
        gateway.stop()


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_an_npx_backend_runs_offline_from_its_prepared_cache_and_is_refused_once_altered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "tiny"
    package.mkdir()
    (package / "package.json").write_text(
        json.dumps({"name": "tiny-mcp", "version": "1.2.3", "bin": {"tiny-mcp": "index.js"}})
    )
    (package / "index.js").write_text(NODE_SERVER)
    (package / "index.js").chmod(0o755)
    subprocess.run(["npm", "pack", "--silent"], cwd=package, check=True, capture_output=True)
    tarball = package / "tiny-mcp-1.2.3.tgz"
    args = ["--yes", "--package", str(tarball), "tiny-mcp"]
    # no registry to reach, no network at all in its sandbox, its cache read-only there
    env = {"npm_config_registry": "http://127.0.0.1:9/"}
    sandbox = {"mode": "auto", "network": "none"}
    backend = {"name": "tiny", "command": "npx", "args": args, "env": env, "sandbox": sandbox}
    config = write_config(tmp_path / "gateway.toml", [backend])

    assert main(["check", "--config", str(config)]) == 0
    warning = f"{config}: backends[0].command: warning: npx installs tiny's package from its registry"
    assert warning in capsys.readouterr().err
    assert main(["prepare", "tiny", "--config", str(config)]) == 0
    assert main(["check", "--config", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err  # pinned now
    entry = tomllib.loads((tmp_path / "gateway.lock.toml").read_text())["backends"]["tiny"]
    cache = tmp_path / "gateway.cache" / "tiny" / "npm"
    assert entry["kind"] == "npm" and entry["package"] == "tiny-mcp" and entry["version"] == "1.2.3"
    assert entry["integrity"].startswith("sha512-") and entry["cache"] == str(cache)
    (tree,) = entry["files"]
    assert Path(tree).parent.parent == cache / "_npx" and Path(tree).name == "node_modules"
    assert entry["run"] == [str(Path(tree) / ".bin" / "tiny-mcp")]  # run directly: no npm at spawn
    capsys.readouterr()
    assert main(["tools", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "tiny_hello" in captured.out
    assert "started process" in captured.err and f"{entry['run'][0]} (sandbox: " in captured.err
    # the run changed nothing its pins cover (npx rewrites its install's lock files, with the same content)
    prepared = pinned(tmp_path / "gateway.lock.toml", "tiny", ("npx", *args))
    assert prepared.env["npm_config_cache"] == str(cache) and prepared.read_only == (str(cache),)

    installed = Path(tree) / "tiny-mcp" / "index.js"
    installed.write_text(installed.read_text() + "// altered in the cache\n")
    assert main(["tools", "--config", str(config)]) == 1
    line = backend_line(capsys.readouterr().out, "tiny")
    assert line.startswith(
        f"backend tiny: pin_mismatch ({tree}: expected {entry['files'][tree]}, found sha256:"
    )


def make_wheel(folder: Path) -> Path:
    """A wheel of project tinypy 1.0.0 whose console script `tinypy-mcp` serves SERVER (no build tool)."""
    body = "def main():\n" + "".join(f"    {line}\n" if line else "\n" for line in SERVER.splitlines())
    info = "tinypy-1.0.0.dist-info"
    files = {
        "tinypy/__init__.py": body,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tinypy\nVersion: 1.0.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\ntinypy-mcp = tinypy:main\n",
    }
    wheel = folder / "tinypy-1.0.0-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            data = text.encode()
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{name},sha256={digest},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")
    return wheel


def test_a_uvx_backend_runs_offline_from_its_prepared_cache_and_is_refused_once_altered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_wheel(tmp_path)
    args = ["--from", str(wheel), "tinypy-mcp"]
    env = {"UV_INDEX_URL": "http://127.0.0.1:9/simple", "UV_PYTHON_DOWNLOADS": "never"}  # nothing to reach
    config = write_config(
        tmp_path / "gateway.toml", [{"name": "py", "command": "uvx", "args": args, "env": env}]
    )

    assert main(["prepare", "py", "--config", str(config)]) == 0
    lock = tmp_path / "gateway.lock.toml"
    entry = tomllib.loads(lock.read_text())["backends"]["py"]
    cache = tmp_path / "gateway.cache" / "py" / "uv"
    assert entry["kind"] == "uv" and entry["package"] == "tinypy" and entry["version"] == "1.0.0"
    assert entry["integrity"] == file_sha256(wheel) and entry["cache"] == str(cache)
    (venv,) = entry["files"]
    assert Path(venv).parent == cache / "archive-v0"
    assert entry["run"] == [str(Path(venv) / "bin" / "tinypy-mcp")]
    capsys.readouterr()
    assert main(["tools", "--config", str(config)]) == 0
    assert "hello" in capsys.readouterr().out
    prepared = pinned(lock, "py", ("uvx", *args))  # the run wrote nothing its pins cover (no bytecode)
    assert prepared.env == {"UV_CACHE_DIR": str(cache), "UV_OFFLINE": "1"}

    (module,) = Path(venv).glob("lib/python*/site-packages/tinypy/__init__.py")
    module.write_text(module.read_text() + "# altered in the cache\n")
    assert main(["tools", "--config", str(config)]) == 1
    line = backend_line(capsys.readouterr().out, "py")
    assert line.startswith(
        f"backend py: pin_mismatch ({venv}: expected {entry['files'][venv]}, found sha256:"
    )


def test_prepare_says_what_it_cannot_pin_as_file_key_reason_and_pins_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backends = [
        {"name": "odd", "command": "uvx", "args": ["--index-url", "http://127.0.0.1:9/", "tool"]},
        {"name": "plain", "command": "/bin/true"},
    ]
    config = write_config(tmp_path / "gateway.toml", backends)
    lock = tmp_path / "gateway.lock.toml"
    assert main(["prepare", "--all", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    reason = "uvx option '--index-url' is not one prepare knows; write the package first"
    assert err.splitlines() == [f"mcp-gateway prepare: {config}: backends[0].args: {reason}"]
    assert f"prepared plain: true {file_sha256(Path('/bin/true'))}" in out
    assert list(tomllib.loads(lock.read_text())["backends"]) == ["plain"]

    assert main(["prepare", "nobody", "--config", str(config)]) == 2
    problem = f"{config}: backends: no stdio backend is named 'nobody'"
    assert capsys.readouterr().err.splitlines() == [f"mcp-gateway prepare: {problem}"]
    lock.write_text("version = 7\n")
    assert main(["prepare", "plain", "--config", str(config)]) == 2
    problem = f"{lock}: version: must be 1 (this gateway's lock format)"
    assert capsys.readouterr().err.splitlines() == [f"mcp-gateway prepare: {problem}"]
