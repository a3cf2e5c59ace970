"""[admin] and `required` in the config: defaults, the token from its variable, and the loopback rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.config import ConfigError, load_config

BACKEND = '[[backends]]\nname = "a"\ncommand = "x"\n'


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    return [f"{problem.key}: {problem.reason}" for problem in error.value.problems]


def test_no_admin_table_no_admin_listener_and_defaults_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(BACKEND)
    config = load_config(path)
    assert config.admin is None and config.backends[0].required is False
    path.write_text(BACKEND + "required = true\n[admin]\n")
    config = load_config(path)
    assert config.admin is not None and (config.admin.host, config.admin.port, config.admin.token) == (
        "127.0.0.1",
        8767,
        None,
    )
    assert config.backends[0].required is True


def test_off_loopback_the_token_is_required(tmp_path: Path) -> None:
    (problem,) = problems(tmp_path, BACKEND + '[admin]\nhost = "0.0.0.0"\n')
    assert problem.startswith("admin.token_env: required when host is not loopback")


def test_the_token_comes_from_its_variable_and_is_withheld_from_backends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = BACKEND + '[admin]\nhost = "10.0.0.5"\nport = 0\ntoken_env = "GW_ADMIN_TOKEN"\n'
    assert problems(tmp_path, text) == [
        "admin.token_env: environment variable GW_ADMIN_TOKEN is not set or empty"
    ]
    monkeypatch.setenv("GW_ADMIN_TOKEN", " \n")
    assert problems(tmp_path, text) == [
        "admin.token_env: environment variable GW_ADMIN_TOKEN is not set or empty"
    ]
    monkeypatch.setenv("GW_ADMIN_TOKEN", "s3cret\n")  # as a mounted secret often ends: stripped
    config = load_config(tmp_path / "g.toml")
    assert config.admin is not None and config.admin.token == "s3cret" and "s3cret" not in repr(config.admin)
    assert "GW_ADMIN_TOKEN" in config.secret_variables()


def test_bad_admin_keys_are_named(tmp_path: Path) -> None:
    found = problems(tmp_path, BACKEND + '[admin]\nport = 70000\npath = "/x"\n')
    assert any(p.startswith("admin.port: must be between 0 and 65535") for p in found)
    assert any(p.startswith("admin.path: unknown key") for p in found)


def test_the_example_config_documents_admin_and_required() -> None:
    config = load_config(Path(__file__).resolve().parents[3] / "config" / "example.toml")
    assert config.admin is not None and (config.admin.host, config.admin.port) == ("127.0.0.1", 8767)
    assert config.admin.token_env is None and config.backends[0].required is False
