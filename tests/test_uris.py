"""Resource URIs: the reversible prefix for collisions and matching URIs against templates."""

from __future__ import annotations

import pytest

from actors.uris import TemplateRoute, assign_public_uris, template_pattern


@pytest.mark.parametrize(
    ("template", "uri", "fits"),
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
def test_template_patterns(template: str, uri: str, fits: bool) -> None:
    assert bool(template_pattern(template).fullmatch(uri)) is fits


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


def test_a_prefixed_template_owns_only_prefixed_uris() -> None:
    route = TemplateRoute("b", "b+", template_pattern("x://{id}"))
    assert route.owns("b+x://9") == "x://9"
    assert route.owns("x://9") is None and route.owns("b+y://9") is None
