"""The cost of redaction (issue #35), in this process, no gateway: what the redactor adds to a log line, an
audit record and a status page when nothing in them is a secret (the case of every call), and when
something is; with the secrets a config holds and with a thousand minted tokens on top.

    .venv/bin/python bench/redaction_cost.py

A forwarded call that ends well adds no redaction at all: no log line is written for it, a span's name and
attributes are redacted once per shape (kept), its id only when a client chose a string, its status only
when it failed. What is measured here is the cost where redaction does run.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from loguru import logger

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.middleware.audit import make_record
from actors.middleware.base import CallOutcome, ClientInfo, ToolCall
from actors.runtime import log, redact
from actors.runtime.redact import REDACTOR, Redactor

LINE: Final = "backend notes: tools/call id=17 answered in 3.2 ms from session 4f2a9c; 12 tools listed"
ROUNDS: Final = 7
CALLS: Final = 20_000


def per_call_us(work: Callable[[], object], calls: int = CALLS, rounds: int = ROUNDS) -> float:
    """The best of ROUNDS of the mean time of one call to `work`, in microseconds (the best: a machine shared
    with other work only ever adds time)."""
    work()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times)


def redactors() -> dict[str, Redactor]:
    few, many = Redactor(), Redactor()
    values = {f"env:SECRET_{n}": secrets.token_urlsafe(24) for n in range(10)}
    few.know("config", values)
    many.know("config", {**values, **{f"env:MORE_{n}": secrets.token_urlsafe(24) for n in range(990)}})
    for n in range(1000):
        many.mint(f"token:{n}", secrets.token_urlsafe(600), time.time() + 3600)
    return {"10 secrets": few, "1,000 secrets + 1,000 minted": many}


def main() -> None:
    print("redact() of a 90-character log message, per call:")
    for name, redactor in redactors().items():
        clean = per_call_us(lambda r=redactor: r.redact(LINE))
        secret = next(iter(redactor._groups["config"]))  # one of its values
        dirty = per_call_us(lambda r=redactor, s=secret: r.redact(f"{LINE} {s}"))
        print(f"  {name:32s} nothing to find {clean:5.2f} us   one secret to take out {dirty:5.2f} us")
    page = "{" + ",".join(f'"backend_{n}": {{"state": "ready", "reason": null}}' for n in range(400)) + "}"
    print(
        f"  a 16 KB status page (nothing to find)  {per_call_us(lambda: REDACTOR.redact(page), 2000):7.1f} us"
    )

    REDACTOR.know("bench", {"env:SECRET": secrets.token_urlsafe(24)})
    with tempfile.TemporaryDirectory() as folder, open(Path(folder) / "stderr.log", "w") as stderr:
        sys.stderr = stderr  # the stderr sink writes here: both sinks run, as when serving with --log-file
        log.configure_logging("INFO", str(Path(folder) / "bench.log"))
        real = log.redact
        best = {True: float("inf"), False: float("inf")}
        for _ in range(ROUNDS):  # interleaved: a machine that slows down slows both alike
            for redacting in (True, False):
                log.redact = real if redacting else (lambda text: text)  # type: ignore[assignment]
                best[redacting] = min(best[redacting], per_call_us(lambda: logger.info("{}", LINE), 2000, 1))
        log.redact = real
        logger.remove()
        sys.stderr = sys.__stderr__
    print(
        f"a log line (stderr and a file, text): {best[False]:.2f} us unredacted, {best[True]:.2f} us redacted"
    )

    call = ToolCall(
        ClientInfo("ws-17", "alice", "claude-code"), "search", "notes", "search", {"q": "x"}, time.time()
    )
    outcome = CallOutcome(result={"content": []}, duration_s=0.001)
    audited = per_call_us(lambda: make_record(call, outcome, True), 5000)
    real_redact = redact.REDACTOR.redact
    redact.REDACTOR.redact = lambda text: text  # type: ignore[method-assign]
    plain = per_call_us(lambda: make_record(call, outcome, True), 5000)
    redact.REDACTOR.redact = real_redact  # type: ignore[method-assign]
    print(f"an audit record (arguments kept): {plain:.2f} us without redaction, {audited:.2f} us with")


if __name__ == "__main__":
    main()
