"""Supply-chain pins as pure functions: npx's package from its arguments, the lock file written in a stable
order and read back, every bad lock as FILE: key: reason, the digests, drift, the offline environment, the
state a refused start leaves, and `check`'s warnings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from actors.backends.errors import BackendRefusedError
from actors.catalog import Catalog, CatalogEvent
from actors.catalog.status import BackendState
from actors.config.diff import ConfigDiff
from actors.config.errors import ConfigError
from actors.config.load import load_config
from actors.runtime.supervisor import ChildEvent, ChildSpec, ChildStarted, ChildStopped, supervise_child
from actors.supply import LockEntry, cache_folder, lock_path, offline_env, read_lock, write_lock
from actors.supply.advice import pin_advice
from actors.supply.digest import MISSING, digest_of, file_sha256, tree_sha256
from actors.supply.kinds import (
    UnpinnableError,
    kind_of,
    npx_command,
    npx_packages,
    package_name,
    uvx_command,
    uvx_install,
)
from actors.supply.pins import drift, repinned

NPM = LockEntry(
    kind="npm",
    argv=("npx", "-y", "@scope/pkg"),
    files={"/c/_npx/1/node_modules": "sha256:aa"},
    package="@scope/pkg",
    version="1.2.3",
    integrity="sha512-xyz==",
    cache="/c",
    run=("/c/_npx/1/node_modules/.bin/pkg", "--port", "3"),
)


@pytest.mark.parametrize(
    ("args", "packages"),
    [
        (["-y", "@modelcontextprotocol/server-memory"], ["@modelcontextprotocol/server-memory"]),
        (["--yes", "pkg@1.0.0", "--port", "3"], ["pkg@1.0.0"]),
        (["--package", "/t/tiny-1.0.0.tgz", "tiny"], ["/t/tiny-1.0.0.tgz"]),
        (["-p", "a", "--package=b", "--", "run-a"], ["a", "b"]),
        (["--", "pkg", "--flag"], ["pkg"]),
    ],
)
def test_npx_arguments_say_which_packages_it_installs(args: list[str], packages: list[str]) -> None:
    assert npx_packages(args) == packages


@pytest.mark.parametrize("args", [[], ["-y"], ["--registry", "http://x", "pkg"]])
def test_npx_arguments_without_a_clear_package_are_refused(args: list[str]) -> None:
    with pytest.raises(UnpinnableError):
        npx_packages(args)


@pytest.mark.parametrize(
    ("args", "options", "source"),
    [
        (["mcp-server-fetch"], ["--from", "mcp-server-fetch"], "mcp-server-fetch"),
        (
            ["--from", "/w/t-1.0-py3-none-any.whl", "t-mcp", "-v"],
            ["--from", "/w/t-1.0-py3-none-any.whl"],
            None,
        ),
        (
            ["-q", "--python=3.12", "--with", "x", "tool"],
            ["-q", "--python", "3.12", "--with", "x", "--from", "tool"],
            "tool",
        ),
    ],
)
def test_uvx_arguments_say_which_environment_it_makes(
    args: list[str], options: list[str], source: str | None
) -> None:
    assert uvx_install(args) == (options, source or options[1])


@pytest.mark.parametrize("args", [[], ["--from", "x"], ["--index-url", "http://x", "tool"]])
def test_uvx_arguments_without_a_clear_package_are_refused(args: list[str]) -> None:
    with pytest.raises(UnpinnableError):
        uvx_install(args)


def test_what_npx_and_uvx_run_and_with_which_arguments() -> None:
    assert npx_command(["-y", "@scope/pkg", "--port", "3"]) == (None, ["--port", "3"])
    assert npx_command(["--package", "/t/tiny.tgz", "tiny", "-v"]) == ("tiny", ["-v"])
    assert npx_command(["--package=a", "--", "run-a", "x"]) == ("run-a", ["x"])
    assert uvx_command(["--from", "x==1", "x-mcp", "--root", "/"]) == ("x-mcp", ["--root", "/"])
    assert uvx_command(["mcp-server-fetch@2025.1", "-v"]) == ("mcp-server-fetch", ["-v"])
    with pytest.raises(UnpinnableError):
        uvx_command(["--from", "x"])


def test_kinds_and_package_names() -> None:
    assert [kind_of(c) for c in ("npx", "/usr/bin/npx", "uvx", "python", "./server.py")] == [
        "npm",
        "npm",
        "uv",
        "exec",
        "exec",
    ]
    assert package_name("@scope/pkg@1.2.3") == "@scope/pkg" and package_name("pkg@^2") == "pkg"


def test_the_lock_file_is_sorted_and_reads_back_as_written(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    lock = lock_path(config)
    assert lock == tmp_path / "gateway.lock.toml"
    assert cache_folder(config, "memory") == tmp_path / "gateway.cache" / "memory"
    script = LockEntry(kind="exec", argv=("./s.py",), files={"/b": "sha256:02", "/a": "sha256:01"})
    write_lock(lock, {"zeta-1": script, "alpha": NPM, "with space": script})
    first = lock.read_text()
    assert read_lock(lock) == {"zeta-1": script, "alpha": NPM, "with space": script}
    write_lock(lock, read_lock(lock))
    assert lock.read_text() == first  # the same pins, the same bytes
    headers = [line for line in first.splitlines() if line.startswith("[backends.") and "files" not in line]
    assert headers == ["[backends.alpha]", '[backends."with space"]', "[backends.zeta-1]"]
    assert first.index('"/a" = ') < first.index('"/b" = ')
    assert read_lock(tmp_path / "absent.lock.toml") == {}


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("version = [", "", "cannot be read"),
        ("version = 2", "version", "must be 1"),
        ('version = 1\n[backends.a]\nkind = "pip"\nargv = ["x"]', "backends.a.kind", "must be one of"),
        ('version = 1\n[backends.a]\nkind = "exec"\nargv = []', "backends.a.argv", "non-empty list"),
        (
            'version = 1\n[backends.a]\nkind = "exec"\nargv = ["x"]\nfiles = {"/x" = 1}',
            "backends.a.files",
            "path = digest",
        ),
        ('version = 1\n[backends.a]\nkind = "npm"\nargv = ["x"]\ncache = 3', "backends.a.cache", "string"),
    ],
)
def test_a_bad_lock_file_is_named_by_file_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    lock = tmp_path / "g.lock.toml"
    lock.write_text(text)
    with pytest.raises(ConfigError) as raised:
        read_lock(lock)
    (problem,) = raised.value.problems
    assert problem.file == str(lock) and problem.key == key and reason in problem.reason


def test_digests_see_content_executable_bits_and_links_but_not_times(tmp_path: Path) -> None:
    tree = tmp_path / "node_modules"
    (tree / "pkg" / "lib").mkdir(parents=True)
    (tree / "pkg" / "lib" / "index.js").write_text("one")
    (tree / ".bin").mkdir()
    (tree / ".bin" / "pkg").symlink_to("../pkg/lib/index.js")
    before = tree_sha256(tree)
    os.utime(tree / "pkg" / "lib" / "index.js", (1, 1))
    assert tree_sha256(tree) == before == digest_of(tree)
    (tree / "pkg" / "lib" / "index.js").chmod(0o755)
    executable = tree_sha256(tree)
    assert executable != before
    (tree / "pkg" / "lib" / "index.js").write_text("two")
    assert tree_sha256(tree) not in (before, executable)
    assert file_sha256(tree / "pkg" / "lib" / "index.js") == (
        "sha256:3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3"
    )
    assert digest_of(tmp_path / "gone") == MISSING


def test_drift_names_the_path_the_expected_and_the_found_digest(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text("print('v1')")
    entry = LockEntry(kind="exec", argv=("./server.py",), files={str(script): file_sha256(script)})
    assert drift(entry, ["./server.py"]) is None
    script.write_text("print('v2')")
    assert drift(entry, ["./server.py"]) == (
        f"{script}: expected {entry.files[str(script)]}, found {file_sha256(script)}"
    )
    assert "prepared for ['./server.py'], the config now runs ['./server.py', '-v']" in str(
        drift(entry, ["./server.py", "-v"])
    )
    script.unlink()
    assert str(drift(entry, ["./server.py"])).endswith("found missing")


def test_a_prepared_package_runs_offline_against_its_cache() -> None:
    assert offline_env(NPM) == {
        "npm_config_cache": "/c",
        "npm_config_offline": "true",
        "npm_config_update_notifier": "false",
        "npm_config_logs_max": "0",
    }
    uv = LockEntry(kind="uv", argv=("uvx", "x"), files={}, cache="/u")
    assert offline_env(uv) == {"UV_CACHE_DIR": "/u", "UV_OFFLINE": "1"}
    assert offline_env(LockEntry(kind="exec", argv=("x",), files={})) == {}


async def test_a_refused_start_is_left_down_as_pin_mismatch_without_a_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = 0

    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal starts
        starts += 1
        raise BackendRefusedError("/s: expected sha256:01, found sha256:02", state="pin_mismatch")

    send, recv = trio.open_memory_channel[ChildEvent](10)
    await supervise_child(ChildSpec("script", start), send)
    events = [recv.receive_nowait() for _ in range(recv.statistics().current_buffer_used)]
    assert starts == 1 and len(events) == 1 and isinstance(events[0], ChildStopped)
    assert not any(isinstance(e, ChildStarted) for e in events)
    _, inbox = trio.open_memory_channel[CatalogEvent](1)
    catalog = Catalog(
        order=["script"], request_timeouts_s={"script": 60.0}, rule="prefix-on-collision", inbox=inbox
    )
    catalog.apply(events[0])
    status = catalog.view().backends["script"]
    assert status.state is BackendState.PIN_MISMATCH and status.settled
    assert status.describe() == "pin_mismatch (/s: expected sha256:01, found sha256:02)"


def test_check_warns_of_unpinned_npx_and_uvx_and_of_a_pin_for_other_arguments(tmp_path: Path) -> None:
    config_path = tmp_path / "gateway.toml"
    config_path.write_text(
        "\n".join(
            f'[[backends]]\nname = "{name}"\ncommand = "{command}"\nargs = {args}\n'
            for name, command, args in (
                ("memory", "npx", '["-y", "@scope/pkg"]'),
                ("fetch", "uvx", '["mcp-server-fetch"]'),
                ("local", "/bin/true", "[]"),
                ("pinned", "npx", '["-y", "@scope/pkg"]'),
                ("moved", "npx", '["-y", "@scope/other"]'),
            )
        )
    )
    write_lock(lock_path(config_path), {"pinned": NPM, "moved": NPM})
    warnings = pin_advice(load_config(config_path))
    assert [(w.file, w.key) for w in warnings] == [
        (str(config_path), "backends[0].command"),
        (str(config_path), "backends[1].command"),
        (str(config_path), "backends[4].command"),
    ]
    assert "npx installs memory's package" in warnings[0].reason and "unpinned" in warnings[0].reason
    assert "uvx installs fetch's package" in warnings[1].reason
    assert "refused (pin_mismatch) until `mcp-gateway prepare moved`" in warnings[2].reason
    assert all(w.reason.startswith("warning: ") for w in warnings)


def test_a_reload_restarts_the_backends_whose_pins_changed() -> None:
    script = LockEntry(kind="exec", argv=("./s.py",), files={"/s.py": "sha256:01"})
    again = LockEntry(kind="exec", argv=("./s.py",), files={"/s.py": "sha256:02"})
    change = ConfigDiff(changed=("edited",), unchanged=("same", "prepared", "new-pin", "unpinned"))
    old = {"same": NPM, "prepared": script}
    new = {"same": NPM, "prepared": again, "new-pin": script}
    after = repinned(change, old, new)
    assert after.changed == ("edited", "prepared", "new-pin") and after.unchanged == ("same", "unpinned")
    assert repinned(change, old, old) is change


def test_a_sandbox_binds_a_prepared_cache_read_only_over_the_writable_work_folder(tmp_path: Path) -> None:
    """The cache beside the config lies inside the backend's work folder (writable by default): bwrap
    binds it read-only after the write binds, so the backend cannot rewrite what its next spawn checks."""
    from actors.config.sandbox_schema import SandboxMode, SandboxSettings
    from actors.sandbox.launch import prepare as launch
    from actors.sandbox.plan import plan
    from actors.sandbox.probe import Primitive, Primitives

    yes, no = Primitive(ok=True, detail="yes"), Primitive(ok=False, detail="no")
    found = Primitives(root=True, userns=yes, bwrap=yes, landlock_abi=7, seccomp=yes, cgroup_v2=no)
    settings = SandboxSettings(mode=SandboxMode.AUTO)
    cache = tmp_path / "gateway.cache" / "memory" / "npm"
    cache.mkdir(parents=True)
    chosen = plan(settings, found)
    prepared = launch(
        "m", ["/bin/true"], cwd=tmp_path, env={}, settings=settings, plan=chosen, read_only=[str(cache)]
    )
    try:
        line = prepared.argv
        pairs = [(line[i], line[i + 1]) for i in range(len(line) - 1)]
        assert ("--bind-try", str(tmp_path)) in pairs
        last = max(i for i, pair in enumerate(pairs) if pair == ("--ro-bind-try", str(cache)))
        assert last > pairs.index(("--bind-try", str(tmp_path)))
    finally:
        prepared.close()


def test_a_failed_install_leaves_the_last_prepared_one_in_place(tmp_path: Path) -> None:
    from actors.supply.prepare import PrepareError, fresh

    installs = tmp_path / "_npx"
    (installs / "old").mkdir(parents=True)
    with pytest.raises(PrepareError), fresh(installs):
        assert not installs.exists()
        (installs / "half").mkdir(parents=True)
        raise PrepareError("npx install exited 1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_npx"]
    assert [p.name for p in installs.iterdir()] == ["old"]
    with fresh(installs):
        (installs / "new").mkdir(parents=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_npx"]
    assert [p.name for p in installs.iterdir()] == ["new"]
