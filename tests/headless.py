"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the status page test.

One browser per test, its own profile in the test's tmp_path, port 0 for DevTools (the URL is read from the
line Chromium prints on stderr). A page is a flat DevTools session over the browser's WebSocket. Waiting on
the page is a MutationObserver inside it, so the test wakes when the DOM changes, never on a timer.
"""

from __future__ import annotations

import base64
import itertools
import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import orjson
import pytest
import trio
from support import drain, search_stream
from trio_websocket import WebSocketConnection, open_websocket_url

CHROMIUM: Final = "/usr/bin/chromium"
DEVTOOLS_LINE: Final = re.compile(rb"DevTools listening on (ws://\S+)")
DEADLINE_S: Final = 30.0
FLAGS: Final = (
    "--headless",
    "--no-sandbox",  # as root in a container; the page is our own
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--window-size=1200,900",
    "--remote-debugging-port=0",
)


def chromium_or_skip() -> str:
    """The browser, or a skip saying how to get it (a failure when MCP_GATEWAY_REQUIRE_BROWSER is set, as
    scripts/test sets it once scripts/setup-browser has installed it)."""
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found is None:
        reason = "chromium is not installed: run scripts/setup-browser (apt-get install chromium)"
        if os.environ.get("MCP_GATEWAY_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


class DevToolsError(Exception):
    pass


@attrs.define
class Page:
    """One tab, as a flat DevTools session on the browser's connection."""

    connection: WebSocketConnection
    session_id: str | None = None  # None: commands to the browser itself
    loaded: trio.Event = attrs.field(factory=trio.Event)  # Page.loadEventFired since the last navigate
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = attrs.field(factory=dict)

    async def command(self, method: str, **params: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[request_id] = send
        message: dict[str, Any] = {"id": request_id, "method": method, "params": params}
        if self.session_id is not None:
            message["sessionId"] = self.session_id
        await self.connection.send_message(orjson.dumps(message).decode())
        with trio.fail_after(DEADLINE_S):
            answer = await receive.receive()
        if "error" in answer:
            raise DevToolsError(f"{method}: {answer['error']}")
        return answer.get("result", {})  # type: ignore[no-any-return]

    async def read(self) -> None:
        """Route each answer to its command; of the events, only the page's load matters here."""
        while True:
            message = orjson.loads(await self.connection.get_message())
            if message.get("method") == "Page.loadEventFired":
                self.loaded.set()
            waiting = self._waiting.pop(message.get("id", -1), None)
            if waiting is not None:
                waiting.send_nowait(message)

    async def evaluate(self, expression: str) -> Any:
        result = await self.command(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, condition: str, deadline_s: float = DEADLINE_S) -> None:
        """Until the JavaScript expression `condition` is true in the page, checked at each DOM change."""
        script = f"""new Promise((resolve) => {{
            const check = () => {{ try {{ if ({condition}) {{ observer.disconnect(); resolve(true); }} }}
                                   catch (error) {{}} }};
            const observer = new MutationObserver(check);
            const everything = {{subtree: true, childList: true, attributes: true, characterData: true}};
            observer.observe(document, everything);
            check();
        }})"""
        with trio.fail_after(deadline_s):
            await self.evaluate(script)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.command("Page.captureScreenshot", format="png")
        await trio.Path(path).write_bytes(base64.b64decode(shot["data"]))
        return path


@asynccontextmanager
async def open_page(url: str, profile: Path) -> AsyncIterator[Page]:
    """A headless Chromium showing `url`, until the block ends."""
    chromium = chromium_or_skip()
    process = await trio.lowlevel.open_process(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"], stdin=-1, stdout=-1, stderr=-1
    )
    assert process.stderr is not None
    try:
        async with trio.open_nursery() as nursery:
            browser_url = await search_stream(process.stderr, DEVTOOLS_LINE, "chromium's DevTools listened")
            nursery.start_soon(drain, process.stderr)
            async with (
                open_websocket_url(browser_url, max_message_size=64 * 1024 * 1024) as connection,
                trio.open_nursery() as reading,
            ):
                yield await _attach(connection, url, reading)
                reading.cancel_scope.cancel()  # before the connection closes under the reader
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        with trio.move_on_after(DEADLINE_S):
            await process.wait()


async def _attach(connection: WebSocketConnection, url: str, nursery: trio.Nursery) -> Page:
    """A new tab with a flat session on it, then `url` loaded in it (so nothing runs in about:blank)."""
    page = Page(connection)
    nursery.start_soon(page.read)
    target = await page.command("Target.createTarget", url="about:blank")
    attached = await page.command("Target.attachToTarget", targetId=target["targetId"], flatten=True)
    page.session_id = attached["sessionId"]
    await page.command("Page.enable")
    page.loaded = trio.Event()
    await page.command("Page.navigate", url=url)
    with trio.fail_after(DEADLINE_S):
        await page.loaded.wait()
    return page
