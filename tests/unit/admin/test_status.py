"""Readiness and the status tree from real catalog views; the state history."""

from __future__ import annotations

import orjson
from catalog_double import crashed, failed, in_flight, make_catalog, make_model, ready, restarting, tell

from actors.admin.history import HISTORY_LENGTH


async def test_not_ready_until_the_first_settle_names_who_is_still_starting() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog)
    tell(catalog, ready("alpha", "add"))
    is_ready, body = model.readiness()
    assert not is_ready and body["settled"] is False
    assert [entry["backend"] for entry in body["not_ready"]] == ["beta"]
    assert body["not_ready"][0] == {
        "backend": "beta",
        "state": "starting",
        "reason": None,
        "required": False,
        "settled": False,
    }
    tell(catalog, failed("beta", "exited with code 3"))
    assert model.readiness() == (True, {"ready": True, "settled": True})  # beta is not required


async def test_a_required_backend_that_is_down_makes_the_gateway_not_ready() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog, required=frozenset({"alpha"}))
    tell(catalog, ready("alpha", "add"))
    tell(catalog, ready("beta"))
    assert model.readiness()[0]
    tell(catalog, restarting("alpha", "exited with code 1"))
    is_ready, body = model.readiness()
    assert not is_ready and body["settled"] is True
    (entry,) = body["not_ready"]
    assert entry["backend"] == "alpha" and entry["required"] and entry["state"] == "restarting"
    assert "exited with code 1" in entry["reason"]


async def test_the_tree_has_frontends_backends_and_what_the_meters_know() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog, required=frozenset({"beta"}))
    tell(catalog, ready("alpha", "add", "echo"))
    meter = model.meters.backend("alpha")
    meter.run_started()
    meter.pid, meter.ready_since = 4242, -5.0
    meter.inflight_calls = lambda: in_flight("tools/call", "tools/call")
    status = model.status()
    assert status["gateway"]["name"] == "gw" and status["gateway"]["ready"] is False
    assert status["frontends"] == [
        {"name": "stdio", "url": None, "session_count": 1, "sessions": ["stdio"]},
        {"name": "http", "url": "http://h/mcp", "session_count": 0, "sessions": []},
    ]
    alpha, beta = status["backends"]
    assert alpha["pid"] == 4242 and alpha["tools"] == 2 and alpha["inflight"] == 2 and alpha["restarts"] == 0
    assert alpha["uptime_s"] >= 5.0 and alpha["required"] is False
    assert (
        beta["state"] == "starting" and beta["pid"] is None and beta["uptime_s"] is None and beta["required"]
    )


async def test_the_history_keeps_changes_and_the_last_error_after_recovery() -> None:
    catalog = make_catalog("alpha")
    model = make_model(catalog)
    history = model.history
    history.record(catalog.view())
    tell(catalog, ready("alpha"))
    history.record(catalog.view())
    history.record(catalog.view())  # the same state again: no new entry
    tell(catalog, restarting("alpha", "boom"))
    history.record(catalog.view())
    tell(catalog, ready("alpha"))
    history.record(catalog.view())
    assert [change["state"] for change in history.of("alpha")] == ["starting", "ready", "restarting", "ready"]
    assert history.last_error["alpha"].reason is not None and "boom" in history.last_error["alpha"].reason
    assert model.status()["backends"][0]["last_error"]["reason"] == history.last_error["alpha"].reason
    # A second reason for the same state (the link's loss, then the supervisor's word on the exit) is one
    # change, with the newer reason, from the time the state began.
    tell(catalog, restarting("alpha", "lost"))
    history.record(catalog.view())
    began = history.changes["alpha"][-1].at
    tell(catalog, restarting("alpha", "exited with code 7"))
    history.record(catalog.view())
    assert [change["state"] for change in history.of("alpha")][-2:] == ["ready", "restarting"]
    assert history.changes["alpha"][-1].at == began and "code 7" in (history.of("alpha")[-1]["reason"] or "")
    for number in range(HISTORY_LENGTH):
        tell(catalog, ready("alpha"))
        history.record(catalog.view())
        tell(catalog, restarting("alpha", f"crash {number}"))
        history.record(catalog.view())
    assert len(history.of("alpha")) == HISTORY_LENGTH


async def test_the_status_says_which_eras_each_backend_is_connected_in() -> None:
    catalog = make_catalog("alpha", "beta")
    model = make_model(catalog)
    tell(catalog, ready("alpha", "echo"))
    meter = model.meters.backend("alpha")
    meter.run_started()
    meter.eras = "modern+legacy"  # a legacy lane beside its modern connection
    alpha, beta = model.status()["backends"]
    assert alpha["eras"] == "modern+legacy" and beta["eras"] is None  # beta has no run yet
    meter.run_ended()
    assert model.status()["backends"][0]["eras"] is None


CHATTY_CRASH = (
    "INFO:server:listening on stdio",
    "WARNING:server:cache almost full",
    "2026-11-25 13:00:00 DEBUG tick",
    "Traceback (most recent call last):",
    "RuntimeError: boom",
)


async def test_the_last_error_shows_only_warning_or_worse_stderr_lines_marked_stderr() -> None:
    catalog = make_catalog("alpha")
    model = make_model(catalog)
    tell(catalog, ready("alpha"))
    tell(catalog, crashed("alpha", "process 7 exited with code 1", *CHATTY_CRASH))
    model.history.record(catalog.view())
    (alpha,) = model.status(stderr=True)["backends"]
    assert alpha["last_error"]["reason"] == (
        "process 7 exited with code 1; stderr: WARNING:server:cache almost full | "
        "Traceback (most recent call last): | RuntimeError: boom"
    )
    assert alpha["history"][-1]["reason"] == alpha["last_error"]["reason"]
    tell(catalog, crashed("alpha", "process 8 exited with code 0", "INFO:server:bye"))
    model.history.record(catalog.view())
    assert model.status(stderr=True)["backends"][0]["last_error"]["reason"] == "process 8 exited with code 0"


async def test_stderr_is_left_out_of_the_status_unless_the_reader_may_see_it() -> None:
    for expose, stderr, shown in ((False, False, False), (False, True, True), (True, False, True)):
        catalog = make_catalog("alpha", expose_stderr=expose)
        model = make_model(catalog)
        tell(catalog, crashed("alpha", "process 7 exited with code 1", "ERROR: key sk-123 rejected"))
        model.history.record(catalog.view())
        (alpha,) = model.status(stderr=stderr)["backends"]
        assert ("sk-123" in orjson.dumps(alpha).decode()) is shown, (expose, stderr)
        assert alpha["last_error"]["reason"].startswith("process 7 exited with code 1")


async def test_a_modern_backends_listen_is_listening_not_a_call_in_flight() -> None:
    catalog = make_catalog("alpha")
    model = make_model(catalog)
    tell(catalog, ready("alpha"))
    meter = model.meters.backend("alpha")
    meter.inflight_calls = lambda: in_flight("subscriptions/listen")
    (alpha,) = model.status()["backends"]
    assert alpha["inflight"] == 0 and alpha["listening"] is True
    meter.inflight_calls = lambda: in_flight("subscriptions/listen", "tools/call")
    (alpha,) = model.status()["backends"]
    assert alpha["inflight"] == 1 and alpha["listening"] is True
