"""[backends.auth] and forward_headers (config/auth_schema.py, config/backend_auth.py): each kind with only
its own keys; secrets by reference, read as a header carries them; a header claimed twice, a protocol
header, a client credential forwarded without allow_client_credentials, and token_exchange or forwarded
headers on a WebSocket backend are `FILE: key: reason`; a reload that changes an auth secret changes the
backend."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import ConfigError, load_config
from actors.config.auth_schema import (
    ClientAuthMethod,
    ClientCredentialsAuth,
    OwnRequests,
    StaticAuth,
    TokenExchangeAuth,
)
from actors.config.backend_schema import RemoteBackend
from actors.config.diff import diff

SECRET: Final = "sts-client-secret-0123"
REMOTE: Final = '[[backends]]\nname = "t"\nurl = "{url}"\n'
EXCHANGE: Final = (
    '[backends.auth]\nkind = "token_exchange"\ntoken_url = "https://idp.example/token"\n'
    'client_id = "mcp-gateway"\nclient_secret = { env = "GW_STS_SECRET" }\n'
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return {problem.key: problem.reason for problem in caught.value.problems}


def remote(url: str = "https://t.example/mcp") -> str:
    return REMOTE.format(url=url)


@pytest.fixture(autouse=True)
def sts_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_STS_SECRET", SECRET)


def test_each_kind_loads_with_its_defaults_and_its_secret_read(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("static-key-value-01\n")
    text = (
        remote()
        + EXCHANGE
        + 'audience = ["tickets"]\nscope = "read write"\nown_requests = "none"\n'
        + '[[backends]]\nname = "s"\nurl = "wss://s.example/mcp"\n'
        + 'auth = { kind = "static", header = "X-Api-Key", format = "{secret}", secret = { file = "key" } }\n'
        + '[[backends]]\nname = "c"\nurl = "https://c.example/mcp"\n'
        + 'auth = { kind = "client_credentials", token_url = "http://127.0.0.1:9/token", client_id = "gw",'
        + ' client_secret = { value = "literal-secret-99" }, client_auth = "post",'
        + ' resource = ["wss://c.example/mcp"] }\n'
    )
    exchange, static, own = load_config(write(tmp_path, text)).backends
    assert isinstance(exchange, RemoteBackend) and isinstance(exchange.auth, TokenExchangeAuth)
    assert exchange.auth.client_secret.reveal() == SECRET
    assert (exchange.auth.header, exchange.auth.format, exchange.auth.negative_ttl_s) == (
        "Authorization",
        "Bearer {token}",
        10.0,
    )
    assert exchange.auth.own_requests is OwnRequests.NONE
    assert exchange.auth.target == "tickets scope:read scope:write"
    assert isinstance(exchange.auth.own(), ClientCredentialsAuth)
    assert exchange.auth.own().client_secret == exchange.auth.client_secret
    assert isinstance(static, RemoteBackend) and isinstance(static.auth, StaticAuth)
    assert static.auth.header_value() == "static-key-value-01"
    assert isinstance(own, RemoteBackend) and isinstance(own.auth, ClientCredentialsAuth)
    assert own.auth.client_auth is ClientAuthMethod.POST and own.auth.resource == ("wss://c.example/mcp",)
    assert "static-key-value-01" not in repr(static) and SECRET not in repr(exchange)


def test_auth_secrets_are_named_and_given_to_the_redactor(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, remote() + EXCHANGE))
    assert dict(config.secrets()).keys() == {"backends[0].auth.client_secret"}
    assert config.secret_values() == {"env:GW_STS_SECRET": SECRET}


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        (
            'auth = { kind = "magic" }\n',
            "backends[0].auth.kind",
            "'magic' is not one of 'static', 'client_credentials', 'token_exchange'",
        ),
        ("auth = { secret = { env = 'X' } }\n", "backends[0].auth.kind", "required key is missing"),
        ('auth = "Bearer abc"\n', "backends[0].auth", "expected a table ([backends.auth]), got a string"),
        (
            'auth = { kind = "static", secret = { env = "GW_STS_SECRET" }, token_url = "https://x/t" }\n',
            "backends[0].auth.token_url",
            "unknown key",
        ),
        (
            'auth = { kind = "static", secret = { env = "GW_STS_SECRET" }, format = "B {secret} {x}" }\n',
            "backends[0].auth.format",
            "'B {secret} {x}' must hold {secret} once, and no other braces (visible ASCII only)",
        ),
        (
            'auth = { kind = "static", secret = { env = "GW_STS_SECRET" }, format = "B\\r\\n{secret}" }\n',
            "backends[0].auth.format",
            "must hold {secret} once",
        ),
        (
            'auth = { kind = "static", secret = { env = "GW_STS_SECRET" }, header = "X Key" }\n',
            "backends[0].auth.header",
            "'X Key' is not an HTTP header name (RFC 9110 token)",
        ),
        (
            'auth = { kind = "static", secret = { env = "GW_MISSING_SECRET" } }\n',
            "backends[0].auth.secret",
            "environment variable GW_MISSING_SECRET is not set or empty",
        ),
        (
            'auth = { kind = "client_credentials", token_url = "ftp://x/t", client_id = "gw",'
            ' client_secret = { env = "GW_STS_SECRET" } }\n',
            "backends[0].auth.token_url",
            "'ftp://x/t' is not an http(s) URL",
        ),
        (
            'auth = { kind = "client_credentials", token_url = "https://x/t", client_id = "g w",'
            ' client_secret = { env = "GW_STS_SECRET" }, scope = "a\\"b" }\n',
            "backends[0].auth.client_id",
            "'g w' must be visible ASCII, no spaces",
        ),
        (
            'auth = { kind = "client_credentials", token_url = "https://x/t", client_id = "gw",'
            ' client_secret = { env = "GW_STS_SECRET" }, negative_ttl_s = -1 }\n',
            "backends[0].auth.negative_ttl_s",
            "must be 0 or more",
        ),
    ],
)
def test_a_wrong_auth_table_names_its_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    problems = problems_of(write(tmp_path, remote() + text))
    assert reason in problems[key], problems


def test_a_header_value_is_refused_when_a_header_cannot_carry_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STS_SECRET", "two\nlines-of-secret")
    problems = problems_of(
        write(tmp_path, remote() + 'auth = { kind = "static", secret = { env = "GW_STS_SECRET" } }\n')
    )
    assert problems == {
        "backends[0].auth.secret": "env:GW_STS_SECRET holds a line break or a control character, which an"
        " HTTP header cannot carry"
    }


def test_what_a_websocket_cannot_carry_per_caller_is_refused(tmp_path: Path) -> None:
    text = remote("wss://t.example/mcp") + 'forward_headers = ["x-tenant"]\n' + EXCHANGE
    problems = problems_of(write(tmp_path, text))
    assert problems["backends[0].auth.kind"].startswith("token_exchange needs an http(s):// backend")
    assert problems["backends[0].forward_headers"].startswith("applies to http(s):// backends only")


def test_a_header_is_written_by_one_place_only(tmp_path: Path) -> None:
    text = (
        remote()
        + 'headers = { authorization = "plain" }\nheaders_env = { AUTHORIZATION = "GW_STS_SECRET" }\n'
        + 'forward_headers = ["Authorization", "Cookie", "Mcp-Session-Id", "mcp-param-region", "X-T",'
        + ' "x-t"]\n'
        + "allow_client_credentials = false\n"
        + EXCHANGE
    )
    problems = problems_of(write(tmp_path, text))
    credential = (
        "is a client's credential: the gateway never passes one on unless allow_client_credentials = true"
        " (prefer [backends.auth])"
    )
    assert problems == {
        "backends[0].forward_headers[0]": f"'Authorization' {credential}",
        "backends[0].forward_headers[1]": f"'Cookie' {credential}",
        "backends[0].forward_headers[2]": "'Mcp-Session-Id' is a header the gateway writes itself",
        "backends[0].forward_headers[3]": "'mcp-param-region' is a header the gateway writes itself",
        "backends[0].forward_headers[5]": "'x-t' is named twice",
        "backends[0].headers.authorization": "[backends.auth] sets 'Authorization' already",
        "backends[0].headers_env.AUTHORIZATION": "[backends.auth] sets 'Authorization' already",
        "backends[0].forward_headers": "[backends.auth] sets 'Authorization': not forwarded",
    }


def test_client_credentials_are_forwarded_only_when_allowed(tmp_path: Path) -> None:
    text = remote() + 'forward_headers = ["Cookie", "traceparent"]\nallow_client_credentials = true\n'
    (backend,) = load_config(write(tmp_path, text)).backends
    assert isinstance(backend, RemoteBackend) and backend.forward_headers == ("Cookie", "traceparent")
    assert load_config(write(tmp_path, text)).forwarded_headers() == {"cookie", "traceparent"}


def test_check_exits_2_naming_the_file_key_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        remote() + 'auth = { kind = "static", header = "Host", secret = { env = "GW_STS_SECRET" } }\n',
    )
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    assert (
        f"{path}: backends[0].auth.header: 'Host' is a header the gateway writes itself"
        in capsys.readouterr().err
    )


def test_a_changed_client_secret_changes_its_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, remote() + EXCHANGE)
    before = load_config(path)
    monkeypatch.setenv("GW_STS_SECRET", "rotated-client-secret-1")
    assert diff(before, load_config(path)).changed == ("t",)


@pytest.mark.parametrize("name", ["search", "reports", "tickets"])
def test_the_examples_commented_out_auth_backends_are_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("SEARCH_KEY", "search-key-0123456789")
    monkeypatch.setenv("IDP_CLIENT_SECRET", SECRET)
    lines = (Path(__file__).resolve().parents[3] / "config" / "example.toml").read_text().splitlines()
    start = lines.index(f'# name = "{name}"') - 1
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    text = "\n".join(block) + "\n"
    if name == "reports":  # its secret file is the operator's; here one beside the config
        (tmp_path / "idp").write_text(SECRET)
        text = text.replace("/run/credentials/mcp-gateway.service/idp", "idp")
    (tmp_path / "backend.toml").write_text(text)
    (backend,) = load_config(tmp_path / "backend.toml").backends
    assert (
        isinstance(backend, RemoteBackend)
        and backend.auth is not None
        and backend.auth.kind
        == {
            "search": "static",
            "reports": "client_credentials",
            "tickets": "token_exchange",
        }[name]
    )


def test_check_warns_of_a_token_endpoint_in_clear_and_a_literal_client_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = remote() + (
        'auth = { kind = "client_credentials", token_url = "http://idp.example/token", client_id = "gw",'
        ' client_secret = { value = "literal-secret-99" } }\n'
        '[[backends]]\nname = "local"\nurl = "https://l.example/mcp"\n'
        'auth = { kind = "client_credentials", token_url = "http://127.0.0.1:8080/token", client_id = "gw",'
        ' client_secret = { env = "GW_STS_SECRET" } }\n'
    )
    path = write(tmp_path, text)
    assert main(["check", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"{path}: backends[0].auth.token_url: warning: plain http to another machine" in err
    assert f"{path}: backends[0].auth.client_secret: warning: a secret written in the config file" in err
    assert "backends[1].auth" not in err  # loopback, and a reference


def test_a_header_value_outside_ascii_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx writes header values as ASCII: another character would fail every request, and the backend with
    them, at run time. A client secret goes form-encoded: any text."""
    monkeypatch.setenv("GW_STS_SECRET", "clé-secrète-0123")
    text = (
        remote()
        + 'headers = { X-Team = "équipe" }\nauth = { kind = "static", secret = { env = "GW_STS_SECRET" } }\n'
    )
    text += '[[backends]]\nname = "c"\nurl = "https://c.example/mcp"\n'
    text += 'auth = { kind = "client_credentials", token_url = "https://x/t", client_id = "gw",'
    text += ' client_secret = { env = "GW_STS_SECRET" } }\n'
    assert problems_of(write(tmp_path, text)) == {
        "backends[0].headers.X-Team": "holds a line break, a control character or a character outside ASCII,"
        " which an HTTP header cannot carry",
        "backends[0].auth.secret": "env:GW_STS_SECRET holds a character outside ASCII, which an HTTP header"
        " cannot carry",
    }
