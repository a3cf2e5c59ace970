"""The admin listener's status page in a real headless Chromium: it shows the tree and each backend live, and
when a backend is killed its state changes on the page without a reload (server-sent events). On failure
the test keeps a screenshot of the page in its tmp_path and names it in the message."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio
from admin_support import admin_gateway, backend_of, with_admin
from headless import DevToolsError, Page, chromium_or_skip, open_page
from support import backend_entry, write_config

SLOW_RESTART = {"backoff_initial_s": 30.0, "backoff_max_s": 30.0}  # restarting for the rest of the test


def card_state(backend: str) -> str:
    return f"document.querySelector('article[data-backend=\"{backend}\"]')?.dataset.state"


async def expect(page: Page, condition: str, what: str, shot: Path) -> None:
    try:
        await page.wait_for(condition)
    except (trio.TooSlowError, DevToolsError) as exc:
        kept = await page.screenshot(shot)
        raise AssertionError(f"the status page never showed {what}; screenshot: {kept}") from exc


AXIS_TEXT = (
    "[...document.querySelectorAll('article[data-backend=\"{}\"] figure')].map((figure) =>"
    " [...figure.querySelectorAll('.y-axis span, .x-axis span')].map((e) => e.textContent).join('|'))"
)


async def expect_axes(page: Page, backend: str) -> None:
    """Each chart has a scale with its unit (top, half, 0) and a time axis."""
    rate, latency = await page.evaluate(AXIS_TEXT.format(backend))
    for axes, unit in ((rate, "calls/s"), (latency, "ms")):
        top, half, zero, *times = axes.split("|")
        assert top.endswith(" " + unit) and half.endswith(" " + unit) and zero == f"0 {unit}", axes
        assert float(top.split()[0]) == 2 * float(half.split()[0]) > 0, axes
        assert times == ["\u22122 min", "\u22121 min", "now"], axes  # a minus sign


async def test_the_status_page_shows_a_killed_backend_restarting(tmp_path: Path) -> None:
    chromium_or_skip()
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=add", restart=SLOW_RESTART, required=True),
            backend_entry("beta", "--only=echo"),
        ],
        name="page-test",
    )
    shot = tmp_path / "status-page.png"
    async with admin_gateway(with_admin(config), tmp_path / "gateway.log") as gateway:
        await gateway.client.initialize()
        await gateway.client.call(1, "add", a=1, b=2)
        assert "result" in await gateway.client.answer_to(1)
        async with open_page(gateway.url + "/", tmp_path / "profile") as page:
            await expect(page, f'{card_state("alpha")} === "ready"', "alpha ready", shot)
            await expect(page, f'{card_state("beta")} === "ready"', "beta ready", shot)
            tree = await page.evaluate('document.getElementById("tree").textContent')
            assert "gateway page-test" in tree and "stdio: 1 session(s)" in tree, tree
            assert await page.evaluate('document.getElementById("ready").textContent') == "ready"
            await expect_axes(page, "alpha")
            eras = backend_of(await gateway.status(), "alpha")["eras"]
            facts = await page.evaluate(
                "document.querySelector('article[data-backend=\"alpha\"] .facts').textContent"
            )
            assert eras == "legacy" and "eraslegacy" in facts, facts  # <dt>eras</dt><dd>legacy</dd> (#24)

            alpha_pid = backend_of(await gateway.status(), "alpha")["pid"]
            assert await page.evaluate(f'document.body.textContent.includes("{alpha_pid}")')
            os.kill(alpha_pid, signal.SIGKILL)

            await expect(page, f'{card_state("alpha")} === "restarting"', "alpha restarting", shot)
            await expect(
                page,
                'document.getElementById("ready").textContent === "not ready"',
                "the gateway not ready (alpha is required)",
                shot,
            )
            history = await page.evaluate(
                "document.querySelector('article[data-backend=\"alpha\"] .history').textContent"
            )
            assert "restarting" in history and "ready" in history, history
            assert await page.evaluate(f'{card_state("beta")} === "ready"')  # beta was not touched
            # The lost link takes alpha's tools out first ("connection closed"); the supervisor's word on the
            # exit follows, and the page shows it once it has it.
            error_text = "document.querySelector('article[data-backend=\"alpha\"] .error').textContent"
            await expect(page, f"/signal|SIGKILL|-9/.test({error_text})", "alpha's exit by signal", shot)
