"""The redactor (runtime/redact.py): every known value, minted token and credential shape taken out of a text,
the text returned untouched (the same object) when it holds none, and a bounded set of what it knows."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from actors.runtime.redact import (
    MIN_CHARS,
    MINTED_KEY_CHARS,
    RETIRED_MAX,
    SHAPES,
    Redactor,
    marker,
)

API = "api-token-0123456789"
FILE = 'file "quoted" \\ back\nslash-secret'
PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIB\n-----END PRIVATE KEY-----"
)


def configured() -> Redactor:
    redactor = Redactor()
    redactor.know("config", {"env:API": API, "file:/run/secret": FILE})
    return redactor


def test_a_text_without_secrets_comes_back_as_it_was() -> None:
    redactor = configured()
    line = 'backend notes: tools/call answered in 3.2 ms (session 4f2a9c); Bearer realm="mcp"'
    assert redactor.redact(line) is line
    assert redactor.redact("") == ""
    assert Redactor().redact(line) is line  # nothing known: the shapes still looked for
    assert Redactor(shapes=False).redact(line) is line  # nothing at all to look for


def test_a_known_value_is_replaced_by_its_name_wherever_it_stands() -> None:
    redactor = configured()
    assert redactor.redact(f"key={API}") == "key=[REDACTED:env:API]"
    assert redactor.redact(f"{API}{API} and {API}") == (
        "[REDACTED:env:API][REDACTED:env:API] and [REDACTED:env:API]"
    )
    assert redactor.redact(f"multi\nline {FILE}!") == "multi\nline [REDACTED:file:/run/secret]!"


def test_a_value_is_found_as_json_writes_it() -> None:
    redactor = configured()
    document = orjson.dumps({"secret": FILE, "list": [API]}).decode()
    redacted = redactor.redact(document)
    assert orjson.loads(redacted) == {"secret": "[REDACTED:file:/run/secret]", "list": ["[REDACTED:env:API]"]}


def test_overlapping_values_are_one_marker() -> None:
    redactor = Redactor()
    redactor.know("config", {"env:LONG": "abcdefgh-ijklmnop", "env:INNER": "efgh-ijklm"})
    assert redactor.redact("<abcdefgh-ijklmnop>") == "<[REDACTED:env:LONG]>"


def test_a_short_value_is_not_looked_for() -> None:
    redactor = Redactor()
    redactor.know("config", {"env:PIN": "1234567", "env:OK": "12345678"})
    assert len("12345678") == MIN_CHARS
    assert redactor.redact("1234567 12345678") == "1234567 [REDACTED:env:OK]"
    assert redactor.known == 1


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl-x_y"),
        ("jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."),
        ("github", "ghp_" + "A1b2" * 9),
        ("github", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        ("slack", "xoxb-1234567890-abcdefghij"),
        ("slack", "xoxp-12345-67890-abcdef"),
        ("aws", "AKIAIOSFODNN7EXAMPLE"),
        ("pem", PEM),
    ],
)
def test_each_shape_is_replaced_by_its_name(shape: str, text: str) -> None:
    assert shape in SHAPES
    assert Redactor().redact(f"before {text} after") == f"before {marker(shape)} after"


def test_a_pem_block_cut_before_its_end_is_taken_out_to_where_its_text_ends() -> None:
    cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn"
    assert Redactor().redact(f"key: {cut}") == "key: [REDACTED:pem]"
    assert Redactor().redact(f'"{cut}", "next"') == '"[REDACTED:pem]", "next"'


def test_a_bearer_token_keeps_its_scheme_but_a_challenge_is_left_alone() -> None:
    redactor = Redactor()
    assert (
        redactor.redact("Authorization: Bearer abc.DEF-123_456~/+==")
        == "Authorization: Bearer [REDACTED:bearer]"
    )
    assert redactor.redact("authorization: bearer 0123456789") == "authorization: bearer [REDACTED:bearer]"
    challenge = 'WWW-Authenticate: Bearer resource_metadata="https://gw/.well-known/x", error="invalid_token"'
    assert redactor.redact(challenge) is challenge
    assert redactor.redact("Bearer short") == "Bearer short"  # under 8 characters: no token


def test_shapes_in_json_never_span_two_strings() -> None:
    document = orjson.dumps({"a": "Bearer 0123456789abc", "b": PEM[:60], "c": "plain"}).decode()
    redacted = orjson.loads(Redactor().redact(document))
    assert redacted == {"a": "Bearer [REDACTED:bearer]", "b": "[REDACTED:pem]", "c": "plain"}


def test_redact_json_reaches_every_string_and_keeps_what_it_does_not_change() -> None:
    redactor = configured()
    clean = {"a": [1, "x", {"b": None}]}
    assert redactor.redact_json(clean) is clean
    dirty = {"a": [1, API, {API: True}], "n": 2.5}
    assert redactor.redact_json(dirty) == {
        "a": [1, "[REDACTED:env:API]", {"[REDACTED:env:API]": True}],
        "n": 2.5,
    }


def test_a_reload_keeps_the_old_values_known_and_bounded() -> None:
    redactor = Redactor()
    redactor.know("config", {"env:A": "first-secret-value"})
    redactor.know("config", {"env:A": "second-secret-value"})
    assert redactor.redact("first-secret-value second-secret-value") == "[REDACTED:env:A] [REDACTED:env:A]"
    for n in range(RETIRED_MAX + 10):
        redactor.know("config", {"env:A": f"rotated-secret-{n:04d}"})
    assert redactor.known == RETIRED_MAX + 1
    assert redactor.redact("first-secret-value") == "first-secret-value"  # the oldest made room
    assert redactor.redact(f"rotated-secret-{RETIRED_MAX + 8:04d}") == "[REDACTED:env:A]"


def test_groups_are_replaced_apart() -> None:
    redactor = Redactor()
    redactor.know("config", {"env:A": "config-secret-1"})
    redactor.know("otlp", {"otlp-header:x-key": "collector-key-1"})
    redactor.know("config", {"env:A": "config-secret-1"})
    assert redactor.redact("collector-key-1 config-secret-1") == (
        "[REDACTED:otlp-header:x-key] [REDACTED:env:A]"
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def minted(clock: Callable[[], float], **kwargs: int) -> Redactor:
    return Redactor(clock=clock, **kwargs)


def test_a_minted_token_is_found_whole_or_by_its_end_and_costs_no_rebuild() -> None:
    redactor = Redactor()
    token = secrets.token_urlsafe(60)  # opaque: only its being minted finds it
    redactor.mint("token:tickets", token, expires_at=time.time() + 60)
    assert redactor.redact(f"sent {token}.") == "sent [REDACTED:token:tickets]."
    assert redactor.redact(f'{{"access_token":"{token}"}}') == '{"access_token":"[REDACTED:token:tickets]"}'
    cut = token[-(MINTED_KEY_CHARS + 5) :]  # a line cut inside it: its end is still found
    assert redactor.redact(f"cut: {cut}") == "cut: [REDACTED:token:tickets]"
    assert redactor.redact(token[:40]) == token[:40]  # its start alone is not looked for
    assert redactor.known_in([f"x {token} y"]) == "token:tickets"
    started = time.perf_counter()
    for n in range(1000):
        redactor.mint(f"token:{n}", secrets.token_urlsafe(600), time.time() + 60)
    assert time.perf_counter() - started < 1.0  # no automaton rebuilt per token (~100 ms each at 4,096)
    assert redactor.known == 1001
    redactor.mint("token:short", "short-token-1", expires_at=time.time() + 60)  # under a key's length
    assert redactor.redact("a short-token-1 b") == "a [REDACTED:token:short] b"


def test_minted_tokens_are_bounded_the_expired_then_the_first_to_expire_leaving() -> None:
    clock = FakeClock()
    redactor = minted(clock, minted_max=3)
    tokens = [secrets.token_hex(20) for _ in range(5)]
    redactor.mint("token:0", tokens[0], expires_at=clock.now - 1)  # expired already
    redactor.mint("token:1", tokens[1], expires_at=clock.now + 50)
    redactor.mint("token:2", tokens[2], expires_at=clock.now + 100)
    assert redactor.redact(tokens[0]) == "[REDACTED:token:0]"  # kept until room is needed
    redactor.mint("token:3", tokens[3], expires_at=clock.now + 200)  # full: the expired one leaves
    assert redactor.redact(tokens[0]) == tokens[0] and redactor.known == 3
    redactor.mint("token:4", tokens[4], expires_at=clock.now + 300)  # then the one expiring first
    assert redactor.redact(tokens[1]) == tokens[1]
    assert [redactor.redact(token) for token in tokens[2:]] == [
        "[REDACTED:token:2]",
        "[REDACTED:token:3]",
        "[REDACTED:token:4]",
    ]


def test_known_in_names_a_value_and_ignores_shapes() -> None:
    redactor = configured()
    assert redactor.known_in(["nothing here", f"x {API} y"]) == "env:API"
    assert redactor.known_in([orjson.dumps({"k": FILE}).decode()]) == "file:/run/secret"
    assert redactor.known_in(["Bearer 0123456789abcdef", "AKIAIOSFODNN7EXAMPLE"]) is None
    assert Redactor(shapes=False).known_in(["anything"]) is None


def test_a_marker_label_holds_nothing_that_breaks_json_or_a_line() -> None:
    assert marker('env:"A"\n\\{}') == "[REDACTED:env:_A_____]"
    assert len(marker("x" * 500)) < 100


@given(
    before=st.text(max_size=40),
    after=st.text(max_size=40),
    value=st.text(alphabet=st.characters(codec="utf-8"), min_size=MIN_CHARS, max_size=60),
)
def test_a_known_value_never_survives_whatever_surrounds_it(before: str, after: str, value: str) -> None:
    assume(value not in marker("env:X"))  # a value the marker itself spells is "found" in the marker
    redactor = Redactor()
    redactor.know("config", {"env:X": value})
    assert value not in redactor.redact(before + value + after)
    assert orjson.dumps(value).decode()[1:-1] not in redactor.redact(
        orjson.dumps([before, value, after]).decode()
    )
