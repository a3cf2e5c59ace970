"""Host and Origin parsing, the request checks and the session counts, as both listeners apply them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.frontends.admission import Admission, client_key, parse_host, parse_origin
from actors.frontends.auth import Refused


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("localhost", ("localhost", None)),
        ("LocalHost:8765", ("localhost", 8765)),
        ("127.0.0.1:8766", ("127.0.0.1", 8766)),
        ("[::1]:8766", ("::1", 8766)),
        ("[::1]", ("::1", None)),
        ("127.0.0.1:1@evil.com", None),
        ("evil.com#127.0.0.1", None),
        ("127.0.0.1:99999", None),
        ("127.0.0.1:", None),
        ("user@localhost", None),
        ("localhost:80:80", None),
        ("", None),
        ("local\x1bhost", None),
        ("::1", None),  # an IPv6 literal needs its brackets
    ],
)
def test_hosts(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert parse_host(value) == parsed


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("http://localhost:8766", ("http", "localhost", 8766)),
        ("https://app.example", ("https", "app.example", 443)),
        ("http://127.0.0.1", ("http", "127.0.0.1", 80)),
        ("http://[::1]:8765", ("http", "::1", 8765)),
        ("http://127.0.0.1:1@evil.com", None),
        ("http://localhost:8766/path", None),
        ("null", None),
        ("file://", None),
        ("javascript:alert(1)", None),
    ],
)
def test_origins(value: str, parsed: tuple[str, str, int] | None) -> None:
    assert parse_origin(value) == parsed


def admission(**overrides: object) -> Admission:
    settings = {
        "path": "/mcp",
        "auth": None,
        "allowed_hosts": ("127.0.0.1", "localhost", "::1"),
        "allowed_origins": ("https://app.example",),
        "max_sessions": 3,
        "max_sessions_per_client": 2,
        **overrides,
    }
    gate = Admission.of(SimpleNamespace(**settings))  # type: ignore[arg-type]
    gate.port = 8766
    return gate


def refusal(check: object, *args: object) -> int | None:
    try:
        check(*args)  # type: ignore[operator]
    except Refused as refused:
        return refused.status
    return None


def test_host_header_refusals() -> None:
    gate = admission()
    assert refusal(gate.check_host, "localhost:8766") is None
    assert refusal(gate.check_host, "[::1]:8766") is None
    assert refusal(gate.check_host, "127.0.0.1:1@evil.com") == 421
    assert refusal(gate.check_host, "evil.example") == 421
    assert refusal(gate.check_host, None) == 421
    assert refusal(admission(allowed_hosts=("*",)).check_host, "anything.example") is None


def test_only_pages_of_the_listener_itself_or_listed_origins_are_allowed() -> None:
    gate = admission()
    assert refusal(gate.check_origin, None) is None  # not a browser
    assert refusal(gate.check_origin, "http://localhost:8766") is None  # a page this listener serves
    assert refusal(gate.check_origin, "https://app.example") is None  # listed
    assert refusal(gate.check_origin, "http://localhost:3000") == 403  # another local server's page
    assert refusal(gate.check_origin, "http://127.0.0.1:1@evil.com") == 403
    assert refusal(gate.check_origin, "http://evil.example:8766") == 403
    assert refusal(gate.check_origin, "null") == 403


def test_the_path_comes_first_and_auth_only_when_configured() -> None:
    gate = admission()
    assert refusal(gate.check, "/other", "evil.example", {}) == 404
    assert refusal(gate.check, "/mcp", "evil.example", {}) == 421
    assert refusal(gate.check, "/mcp", "localhost:8766", {"origin": "http://localhost:3000"}) == 403
    assert gate.check("/mcp", "localhost:8766", {}) is None  # no auth: no subject
    assert refusal(admission(auth=object()).check, "/mcp", "localhost:8766", {}) == 401


def test_sessions_are_counted_per_client() -> None:
    gate = admission(max_sessions=10)
    alice = client_key("alice", "10.0.0.1")
    assert gate.open_session("alice", "10.0.0.1", 0) == alice
    gate.open_session("alice", "10.0.0.2", 0)  # the subject counts, not the address
    assert refusal(gate.open_session, "alice", "10.0.0.1", 0) == 429
    gate.open_session(None, "10.0.0.1", 0)  # the same address without a token is another client
    gate.close_session(alice)
    gate.open_session("alice", "10.0.0.1", 0)
    assert refusal(gate.open_session, "alice", "10.0.0.1", 0) == 429


def test_a_listener_at_its_limit_refuses_before_counting() -> None:
    gate = admission()
    assert refusal(gate.open_session, "bob", "10.0.0.1", 3) == 503
    gate.open_session("bob", "10.0.0.1", 2)
    gate.open_session("bob", "10.0.0.1", 2)  # the 503 did not count against bob


@given(st.text(max_size=80))
def test_any_host_or_origin_text_is_parsed_or_refused_never_raises(value: str) -> None:
    gate = admission()
    parse_host(value)
    parse_origin(value)
    assert refusal(gate.check_host, value) in (None, 421)
    assert refusal(gate.check_origin, value) in (None, 403)
