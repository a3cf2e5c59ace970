"""[NAME.auth] as an OAuth resource server: trusted issuers in [[NAME.auth.issuers]], the metadata keys and
the tool scopes; every wrong value is FILE: key: reason, and nothing that could break a header gets in."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from actors.config import load_config
from actors.config.errors import ConfigError
from actors.config.oauth_schema import InsufficientScope

MINIMAL_BACKEND: Final = '[[backends]]\nname = "a"\ncommand = "python"\n'


def problems_of(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert all(str(problem).startswith(f"{path}: ") for problem in caught.value.problems)
    return {problem.key: problem.reason for problem in caught.value.problems}


def test_issuers_alone_turn_token_checks_on_with_their_defaults(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    path = tmp_path / "gateway.toml"
    path.write_text(
        MINIMAL_BACKEND + '[http]\n[http.auth]\nresource = "https://gw.example/mcp"\n'
        'scopes_supported = ["tools:read"]\ntool_scopes = { add = ["math"] }\ninsufficient_scope = "refuse"\n'
        '[[http.auth.issuers]]\nissuer = "https://idp.example"\n'
        '[[http.auth.issuers]]\nissuer = "https://keys.example"\njwks_file = "jwks.json"\n'
        'client_id_audiences = ["claude-code"]\n'
    )
    http = load_config(path).http
    assert http is not None and http.auth is None and http.oauth is not None and http.checks_tokens
    first, second = http.oauth.issuers
    assert (first.issuer, first.jwks_url, first.jwks_file, first.algorithms) == (
        "https://idp.example",
        None,
        None,
        ("RS256", "ES256"),
    )
    assert second.jwks_file == tmp_path / "jwks.json" and second.client_id_audiences == ("claude-code",)
    assert http.oauth.tool_scopes == {"add": frozenset({"math"})}
    assert http.oauth.insufficient_scope is InsufficientScope.REFUSE


def test_every_wrong_issuer_key_is_named(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + "[websocket]\n[websocket.auth]\n"
        'resource = "https://gw.example/mcp/"\n'
        'scopes_supported = ["a b", "ok"]\n'
        'tool_scopes = { add = ["x\\"y"] }\n'
        'insufficient_scope = "deny"\n'
        "[[websocket.auth.issuers]]\n"
        'issuer = "idp.example"\nalgorithms = ["HS256", "none"]\nleeway_s = 3600\n'
        "refresh_min_s = 100\nrefresh_max_s = 10\n",
    )
    algorithms = [problems.pop(f"websocket.auth.issuers[0].algorithms[{n}]") for n in (0, 1)]
    assert algorithms[0].startswith("'HS256' is not an asymmetric JWS algorithm (ES256,")
    assert algorithms[1].startswith("'none' is not an asymmetric JWS algorithm")
    assert problems == {
        "websocket.auth.resource": "'https://gw.example/mcp/' is not the listener's public URL (http(s) or "
        "ws(s), path included, no trailing slash)",
        "websocket.auth.scopes_supported[0]": (
            "'a b' is not a scope (visible ASCII, no quote, space or backslash)"
        ),
        "websocket.auth.tool_scopes.add": "('x\"y',) holds something that is not a scope",
        "websocket.auth.insufficient_scope": "'deny' is not one of 'hide', 'refuse'",
        "websocket.auth.issuers[0].issuer": (
            "'idp.example' is not an http(s) URL (no spaces, quotes or backslashes)"
        ),
        "websocket.auth.issuers[0].leeway_s": "must be between 0 and 300",
        "websocket.auth.issuers[0].refresh_max_s": "must not be less than refresh_min_s",
    }


def test_issuer_tables_that_contradict_themselves_are_named(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        MINIMAL_BACKEND + "[http]\n[http.auth]\n"
        '[[http.auth.issuers]]\nissuer = "https://idp.example"\n'
        'jwks_url = "https://idp.example/jwks"\njwks_file = "missing.json"\n'
        '[[http.auth.issuers]]\nissuer = "https://idp.example"\n',
    )
    missing = problems.pop("http.auth.issuers[0].jwks_file")
    assert problems == {
        "http.auth.issuers[0]": "set at most one of jwks_url and jwks_file (neither: discovery)",
        "http.auth.issuers[1].issuer": "https://idp.example is listed twice",
    }
    assert missing.startswith("'missing.json' (") and missing.endswith(") is not a file")
    assert problems_of(tmp_path, MINIMAL_BACKEND + "[http]\n[http.auth]\n") == {
        "http.auth": "set jwt_secret_env, jwt_public_key_file or [[http.auth.issuers]]"
    }
