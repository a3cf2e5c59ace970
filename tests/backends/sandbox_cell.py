"""One cell of the sandbox's degrade matrix, run inside the environment under test (no user namespaces, no
Landlock, an unprivileged uid): probe, plan `auto` and `require`, then launch a small program under `auto`
that tries to write outside `write` and connect to a loopback listener. Prints one JSON object.

    python sandbox_cell.py OUTSIDE_FOLDER WORK_FOLDER
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import trio

from actors.backends.sandboxing import SandboxUnavailableError, sandboxed
from actors.config.sandbox_schema import SandboxMode, SandboxSettings
from actors.sandbox.probe import primitives

ATTEMPT = r"""
import socket, sys
out = []
try:
    open(sys.argv[1] + "/cell.txt", "w").write("x"); out.append("write:done")
except OSError as exc:
    out.append("write:refused")
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2); out.append("connect:done")
except OSError as exc:
    out.append("connect:refused")
print(" ".join(out))
"""


async def main(outside: str, work: str) -> dict[str, object]:
    found = primitives()
    result: dict[str, object] = {"primitives": found.as_json()}
    reports: dict[str, object] = {}
    try:
        settings = SandboxSettings(mode=SandboxMode.REQUIRE)
        await sandboxed(
            "cell",
            ["/bin/true"],
            cwd=Path(work),
            env={},
            settings=settings,
            warned=set(),
            report_to=lambda report: reports.update(require=report),
        )
        result["require"] = "starts"
    except SandboxUnavailableError as exc:
        result["require"] = str(exc)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    argv = ["/usr/bin/python3", "-c", ATTEMPT, outside, str(listener.getsockname()[1])]
    warned: set[str] = set()
    launch = await sandboxed(
        "cell",
        argv,
        cwd=Path(work),
        env={"PATH": "/usr/bin:/bin"},
        settings=SandboxSettings(mode=SandboxMode.AUTO),
        warned=warned,
        report_to=lambda report: reports.update(auto=report),
    )
    assert launch is not None
    launch.release()  # this script stops the run itself: no lifeline watcher to wait for
    done = await trio.run_process(
        launch.argv, env=launch.env, capture_stdout=True, capture_stderr=True, check=False, **launch.options
    )
    launch.close()
    listener.close()
    result.update(
        auto=reports["auto"],
        ran=done.stdout.decode().strip(),
        stderr=done.stderr.decode()[-300:],
        degraded=bool(warned),
    )
    return result


if __name__ == "__main__":
    print(json.dumps(trio.run(main, sys.argv[1], sys.argv[2])))
