"""MCP Apps' references as pure functions: the namespaced form keeps the scheme, every place a result or a
tool names an app is rewritten, and an app the caller may not read is no longer named."""

from __future__ import annotations

from typing import Any

from actors.output.app_uris import (
    is_ui,
    result_with_public_uris,
    tool_with_public_app,
    ui_prefixed,
    ui_unprefixed,
)

APP = "ui://widget/app.html"
PUBLIC = "ui://beta/widget/app.html"


def public_of(uri: str) -> str:
    return ui_prefixed("beta", uri) if is_ui(uri) else f"beta+{uri}"


def test_the_namespaced_form_keeps_the_scheme_and_goes_back_exactly() -> None:
    assert ui_prefixed("beta", APP) == PUBLIC
    assert ui_unprefixed(PUBLIC) == ("beta", APP)
    assert ui_unprefixed(ui_prefixed("beta", "UI://Widget")) == ("beta", "UI://Widget")  # as written
    assert ui_unprefixed("ui:///x") is None and ui_unprefixed("ui://nobody") is None
    assert ui_unprefixed("file:///x") is None and not is_ui(7) and is_ui("Ui://x")


def test_a_tools_app_reference_is_public_in_both_spellings_and_the_rest_untouched() -> None:
    tool = {
        "name": "show",
        "_meta": {
            "ui": {"resourceUri": APP, "csp": {"connectDomains": ["x"]}},
            "ui/resourceUri": APP,
            "k": 1,
        },
    }
    shown: Any = tool_with_public_app(tool, public_of, None)
    assert shown["_meta"] == {
        "ui": {"resourceUri": PUBLIC, "csp": {"connectDomains": ["x"]}},
        "ui/resourceUri": PUBLIC,
        "k": 1,
    }
    assert tool["_meta"]["ui"]["resourceUri"] == APP  # the catalog's copy is not touched
    plain = {"name": "plain", "_meta": {"ui": "junk", "ui/resourceUri": 7}}
    assert tool_with_public_app(plain, public_of, None) is plain


def test_an_app_the_caller_may_not_read_is_no_longer_named() -> None:
    tool = {
        "name": "show",
        "_meta": {"ui": {"resourceUri": APP, "visibility": ["app"]}, "ui/resourceUri": APP},
    }
    shown: Any = tool_with_public_app(tool, public_of, lambda uri: uri != PUBLIC)
    assert shown["_meta"] == {"ui": {"visibility": ["app"]}}


def result() -> dict[str, Any]:
    return {
        "content": [
            {"type": "text", "text": "shown"},
            {"type": "resource_link", "uri": APP, "name": "app"},
            {
                "type": "resource",
                "resource": {"uri": APP, "text": "<p/>", "_meta": {"ui": {"prefersBorder": True}}},
            },
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
            "junk",
        ],
        "_meta": {"ui": {"resourceUri": APP}},
        "structuredContent": {"uri": APP},  # the tool's own data: not the gateway's to rewrite
    }


def test_a_results_links_embedded_resources_and_meta_are_public() -> None:
    shown = result_with_public_uris(result(), public_of, None)
    assert [item.get("uri") or item.get("resource", {}).get("uri") for item in shown["content"][1:4]] == [
        PUBLIC,
        PUBLIC,
        "beta+file:///a",
    ]
    assert shown["content"][2]["resource"]["_meta"] == {"ui": {"prefersBorder": True}}
    assert shown["_meta"] == {"ui": {"resourceUri": PUBLIC}}
    assert shown["structuredContent"] == {"uri": APP} and shown["content"][4] == "junk"


def test_a_result_loses_the_apps_the_caller_may_not_read_and_keeps_other_links() -> None:
    shown = result_with_public_uris(result(), public_of, lambda uri: not is_ui(uri))
    assert [item if isinstance(item, str) else item["type"] for item in shown["content"]] == [
        "text",
        "resource_link",
        "junk",
    ]
    assert shown["content"][1]["uri"] == "beta+file:///a" and shown["_meta"] == {"ui": {}}


def test_a_result_naming_nothing_is_the_same_object() -> None:
    plain = {"content": [{"type": "text", "text": "x"}], "_meta": {"k": 1}}
    assert result_with_public_uris(plain, public_of, None) is plain
    odd = {"content": "x", "_meta": [1]}
    assert result_with_public_uris(odd, public_of, lambda uri: False) is odd
