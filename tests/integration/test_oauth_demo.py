"""scripts/oauth-demo, the README's OAuth quick-start, runs as a new user would run it: a real provider,
a token by client_credentials, a 401 without it and the demo tools with it."""

from __future__ import annotations

import sys

import trio
from oauth_support import free_port
from support import ROOT


async def test_the_oauth_quick_start_lists_the_demo_tools_with_its_token_only() -> None:
    argv = [sys.executable, str(ROOT / "scripts" / "oauth_demo.py"), "--once"]
    argv += ["--port", str(free_port()), "--idp-port", str(free_port())]
    with trio.fail_after(120):
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    said = done.stdout.decode()
    assert done.returncode == 0, said + done.stderr.decode()
    assert "== without a token: HTTP 401" in said and 'resource_metadata="http://127.0.0.1:' in said
    listed = said.split("== with it, tools/list: ", 1)[1].split("\n", 1)[0].split(", ")
    assert {"add_note", "calculate", "utility__search"} <= set(listed)
