"""What a reload would change, from two configs (config/diff.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import with_websocket, write_config

from actors.config import load_config
from actors.config.diff import diff


def backend(name: str, *args: str, **settings: Any) -> dict[str, Any]:
    return {"name": name, "command": "python", "args": list(args), **settings}


def loaded(tmp_path: Path, name: str, backends: list[dict[str, Any]], **gateway: Any) -> Any:
    return load_config(write_config(tmp_path / name, backends, **gateway))


def test_backends_added_removed_changed_and_untouched(tmp_path: Path) -> None:
    old = loaded(tmp_path, "a.toml", [backend("keep"), backend("gone"), backend("edit", "-v")])
    new = loaded(tmp_path, "b.toml", [backend("keep"), backend("edit", "-q"), backend("new")])
    change = diff(old, new)
    assert (change.added, change.removed, change.changed, change.unchanged) == (
        ("new",),
        ("gone",),
        ("edit",),
        ("keep",),
    )
    assert change.summary() == "added new; removed gone; restarted edit; 1 backend untouched"
    assert diff(old, old).nothing


def test_a_gateway_default_a_backend_uses_restarts_it_and_spares_one_with_its_own(tmp_path: Path) -> None:
    backends = [backend("own", request_timeout_s=5), backend("default")]
    old = loaded(tmp_path, "a.toml", backends, request_timeout_s=60)
    new = loaded(tmp_path, "b.toml", backends, request_timeout_s=30)
    change = diff(old, new)
    assert (change.changed, change.unchanged, change.sessions_changed) == (("default",), ("own",), True)


def test_a_tool_policy_restarts_its_backend_and_the_naming_rule_is_the_catalogs(tmp_path: Path) -> None:
    old = loaded(tmp_path, "a.toml", [backend("a"), backend("b")])
    new = loaded(
        tmp_path, "b.toml", [backend("a", tools={"deny": ["x"]}), backend("b")], tool_names="always-prefix"
    )
    change = diff(old, new)
    assert change.changed == ("a",) and change.catalog_changed and not change.reordered
    swapped = loaded(tmp_path, "c.toml", [backend("b"), backend("a")])
    assert diff(old, swapped).reordered and not diff(old, swapped).changed


def test_listener_settings_apply_and_its_address_or_middleware_need_a_restart(tmp_path: Path) -> None:
    old = load_config(with_websocket(write_config(tmp_path / "a.toml", [backend("a")]), max_sessions=10))
    new = load_config(with_websocket(write_config(tmp_path / "b.toml", [backend("a")]), max_sessions=20))
    assert diff(old, new).listeners == ("websocket",) and not diff(old, new).needs_restart
    moved = load_config(with_websocket(write_config(tmp_path / "c.toml", [backend("a")]), port=1))
    assert diff(old, moved).needs_restart == ("[websocket] host or port",)
    none = loaded(tmp_path, "d.toml", [backend("a")])
    assert diff(old, none).needs_restart == ("[websocket] removed",)
    # a new listener also changes the roots default of every backend: restarted to be told
    assert diff(none, old).changed == ("a",)


def test_new_issuers_or_key_sources_need_a_restart_and_other_auth_keys_apply(tmp_path: Path) -> None:
    def with_issuers(name: str, *issuers: str, scopes: str = "a") -> Any:
        config = write_config(tmp_path / name, [backend("a")])
        tables = "".join(f'[[http.auth.issuers]]\nissuer = "{issuer}"\n' for issuer in issuers)
        config.write_text(
            config.read_text() + f'\n[http]\n[http.auth]\nscopes_supported = ["{scopes}"]\n{tables}'
        )
        return load_config(config)

    one = with_issuers("a.toml", "https://idp.example")
    rescoped = with_issuers("b.toml", "https://idp.example", scopes="b")
    assert diff(one, rescoped).listeners == ("http",) and not diff(one, rescoped).needs_restart
    two = with_issuers("c.toml", "https://idp.example", "https://other.example")
    assert diff(one, two).needs_restart == ("[[http.auth.issuers]] issuers or where their keys come from",)
    stdio = write_config(tmp_path / "d.toml", [backend("a")])
    stdio.write_text(stdio.read_text() + '\n[stdio]\nsubject = "alice"\n')
    assert diff(loaded(tmp_path, "e.toml", [backend("a")]), load_config(stdio)).needs_restart == ("[stdio]",)
