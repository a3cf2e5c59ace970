"""Resource URIs: the reversible prefix for collisions and matching URIs against templates."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.catalog.naming import Route
from actors.catalog.uri_templates import fits
from actors.catalog.uris import TemplateRoute, assign_public_uris, prefixed, unprefixed

# The reference for what a template matches: a regex per RFC 6570 operator. Right, but it backtracks
# (exponentially on x{.a}/y), so the gateway matches in linear time instead and is checked against it.
_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
_OPERATOR_PATTERNS = {
    "": r"[^/?#]*",
    "+": r".*",
    "#": r"(?:#.*)?",
    ".": r"(?:\.[^/?#]*)*",
    "/": r"(?:/[^/?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)*",
}


def reference_pattern(template: str) -> re.Pattern[str]:
    parts, last = [], 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        parts.append(_OPERATOR_PATTERNS[match.group(1)])
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts), re.DOTALL)


@pytest.mark.parametrize(
    ("template", "uri", "fitting"),
    [
        ("test://{owner}/items/{id}", "test://x/items/7", True),
        ("test://{owner}/items/{id}", "test://x/y/items/7", False),  # simple expansion: no slashes
        ("file:///{+path}", "file:///a/b/c.txt", True),  # reserved expansion: slashes allowed
        ("api://search{?q,limit}", "api://search?q=a&limit=3", True),
        ("api://search{?q,limit}", "api://search", True),
        ("db://{table}{/id}", "db://users/42", True),
        ("exact://only", "exact://only-not", False),
    ],
)
def test_template_patterns(template: str, uri: str, fitting: bool) -> None:
    assert fits(template, uri) is fitting
    assert bool(reference_pattern(template).fullmatch(uri)) is fitting


def test_colliding_uris_get_a_reversible_prefix_in_config_order() -> None:
    lists = {
        "a": [{"uri": "x://1"}, {"uri": "x://2"}],
        "b": [{"uri": "x://2"}, {"uri": "x://3"}, {"name": "no uri"}],
    }
    assert assign_public_uris(["a", "b"], lists, "uri", always_prefix=False) == {
        "a": {"x://1": "x://1", "x://2": "x://2"},
        "b": {"x://2": "b+x://2", "x://3": "x://3"},
    }
    assert assign_public_uris(["b", "a"], lists, "uri", always_prefix=False)["a"]["x://2"] == "a+x://2"
    assert assign_public_uris(["a"], lists, "uri", always_prefix=True) == {
        "a": {"x://1": "a+x://1", "x://2": "a+x://2"}
    }


def test_the_backend_prefix_reverses() -> None:
    assert unprefixed(prefixed("b", "x://a+b")) == Route("b", "x://a+b")
    assert unprefixed("file:///a") is None


def test_a_prefixed_template_owns_only_prefixed_uris() -> None:
    route = TemplateRoute("b", "b+", "x://{id}")
    assert route.owns("b+x://9") == "x://9"
    assert route.owns("x://9") is None and route.owns("b+y://9") is None


template_parts = st.sampled_from(
    ["a", "-", "/", "?", "#", ".", ";", "&", "{", "}", "x://", *(f"{{{op}v}}" for op in ["", *"+#./;?&"])]
)
uri_chars = st.text(alphabet="a-/?#.;&{}x:\n", max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(template_parts, max_size=6).map("".join), uri_chars)
def test_a_uri_fits_a_template_exactly_when_the_reference_regex_matches_it(template: str, uri: str) -> None:
    assert fits(template, uri) is bool(reference_pattern(template).fullmatch(uri))


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("x{.a}/y", "x" + "." * 8000 + "/z"),  # exponential for the regex
        ("x{;a}/y", "x" + ";" * 8000 + "/z"),
        ("x{&a}#y", "x" + "&" * 8000 + "#z"),
        ("file:///{a}-{b}-{c}.txt", "file:///" + "-" * 8000),  # cubic for the regex
    ],
)
def test_a_crafted_uri_is_matched_in_linear_time(template: str, uri: str) -> None:
    began = time.perf_counter()
    assert not fits(template, uri)
    assert time.perf_counter() - began < 2.0  # the regex takes minutes to ages on these
