"""A legacy session's level and subscriptions as kept in Redis: only what a client could have set is read
back (hostile or broken hash fields are left out), and only answered setLevel, subscribe and unsubscribe
requests with usable values change it."""

from __future__ import annotations

from actors.fleet.session_state import MAX_KEPT_URI_CHARS, MAX_KEPT_URIS, SessionState, change_of


def test_state_read_back_leaves_out_what_no_client_could_have_set() -> None:
    raw = {
        b"level": b"shouting",
        b"sub:test://t/readme": b"1",
        b"sub:": b"1",
        b"sub:" + b"x" * (MAX_KEPT_URI_CHARS + 1): b"1",
        b"other": b"1",
        "sub:text-key": b"1",
    }
    state = SessionState.of_fields(raw)
    assert state == SessionState(level=None, uris={"test://t/readme"})
    assert SessionState.of_fields(None) == SessionState()
    assert SessionState.of_fields([b"level", b"error"]) == SessionState()


def test_state_read_back_holds_at_most_a_sessions_subscriptions() -> None:
    raw = {b"sub:test://t/%d" % n: b"1" for n in range(MAX_KEPT_URIS + 50)}
    assert len(SessionState.of_fields({**raw, b"level": b"error"}).uris) == MAX_KEPT_URIS


def test_state_written_again_is_what_is_read_back() -> None:
    state = SessionState(level="warning", uris={"test://t/a", "test://t/ü"})
    assert SessionState.of_fields(state.fields()) == state


def test_only_a_known_level_or_a_usable_uri_is_a_change() -> None:
    assert change_of("logging/setLevel", {"level": "error"}) == ("level", "error")
    assert change_of("logging/setLevel", {"level": "loud"}) is None
    assert change_of("logging/setLevel", {"level": 3}) is None
    assert change_of("resources/subscribe", {"uri": "test://t/a"}) == ("subscribe", "test://t/a")
    assert change_of("resources/unsubscribe", {"uri": "test://t/a"}) == ("unsubscribe", "test://t/a")
    assert change_of("resources/subscribe", {"uri": "x" * (MAX_KEPT_URI_CHARS + 1)}) is None
    assert change_of("resources/subscribe", {"uri": ""}) is None
    assert change_of("resources/subscribe", ["test://t/a"]) is None
    assert change_of("tools/call", {"uri": "test://t/a"}) is None
