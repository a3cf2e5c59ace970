"""Secrets by reference (config/secret.py): `{ env }`, `{ file }` and `{ value }` in a backend's env and
headers, resolved once at load; every reference that cannot be read is `FILE: key: reason` naming the
variable or the file, never a value; a secret's repr, str, JSON form and `check` output name it; `check`
warns of literals, files others may read, values too short for the redactor, credentials written as plain
strings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import ConfigError, StdioBackend, load_config
from actors.config.diff import diff
from actors.config.secret import MAX_FILE_BYTES, Secret, SecretSource, revealed

ENV_VALUE: Final = "env-secret-d41d8cd98f00"
FILE_VALUE: Final = "file-secret-8f00b204e980"
LITERAL: Final = "literal-secret-0998ecf8427e"
BACKEND: Final = '[[backends]]\nname = "a"\ncommand = "python3"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return {problem.key: problem.reason for problem in caught.value.problems}


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config with a secret of each kind in env and headers, its file beside it (with a line break)."""
    monkeypatch.setenv("GW_TEST_SECRET", ENV_VALUE)
    secret_file = tmp_path / "creds" / "token"
    secret_file.parent.mkdir()
    secret_file.write_text(FILE_VALUE + "\r\n\n")
    secret_file.chmod(0o600)
    return write(
        tmp_path,
        BACKEND + 'env = { LOG_LEVEL = "debug", A = { env = "GW_TEST_SECRET" }, B = { file = "creds/token" },'
        f' C = {{ value = "{LITERAL}" }} }}\n'
        '[[backends]]\nname = "r"\nurl = "https://mcp.example/mcp"\n'
        'headers = { X-Team = "tools", Authorization = { file = "creds/token" } }\n'
        'headers_env = { X-Key = "GW_TEST_SECRET" }\n',
    )


def test_each_kind_of_reference_is_read_once_at_load(sources: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")  # a relative file is taken against the config's folder, not the working one
    stdio, remote = load_config(sources).backends
    assert isinstance(stdio, StdioBackend)
    assert revealed(stdio.env) == {"LOG_LEVEL": "debug", "A": ENV_VALUE, "B": FILE_VALUE, "C": LITERAL}
    assert revealed(remote.headers) == {"X-Team": "tools", "Authorization": FILE_VALUE, "X-Key": ENV_VALUE}
    names = {name: value.name for name, value in stdio.env.items() if isinstance(value, Secret)}
    assert names == {"A": "env:GW_TEST_SECRET", "B": "file:creds/token", "C": "value:backends[0].env.C"}
    secret = stdio.env["B"]
    assert isinstance(secret, Secret) and secret.path == sources.parent / "creds" / "token"


def test_a_secret_shows_its_name_and_never_its_value(sources: Path) -> None:
    config = load_config(sources)
    stdio, remote = config.backends
    for shown in (
        repr(config),
        str(config),
        repr(stdio.env),
        str(stdio.env),
        repr(remote),
        f"{stdio.env['A']}",
    ):
        assert ENV_VALUE not in shown and FILE_VALUE not in shown and LITERAL not in shown
    secret = stdio.env["A"]
    assert isinstance(secret, Secret)
    assert (repr(secret), str(secret), secret.as_json()) == (
        "Secret(env:GW_TEST_SECRET)",
        "<secret env:GW_TEST_SECRET>",
        {"secret": "env:GW_TEST_SECRET"},
    )
    assert secret.reveal() == ENV_VALUE


def test_the_redactor_is_told_every_value_the_config_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The references, and what the older *_env keys read: listener and admin tokens, a URL's password."""
    for name, value in {"HS": "hs256-key-value", "ADMIN": "admin-token-value", "AUDIT_DB": "x"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AUDIT_DB", "postgresql://gw:db-pass%21word@db/audit")
    monkeypatch.setenv("GW_TEST_SECRET", ENV_VALUE)
    path = write(
        tmp_path,
        BACKEND + 'env = { A = { env = "GW_TEST_SECRET" }, B = { value = "literal-1234" } }\n'
        '[[backends]]\nname = "r"\nurl = "https://user:url-pass-word@mcp.example/mcp"\n'
        '[websocket]\nport = 0\n[websocket.auth]\njwt_secret_env = "HS"\n'
        '[admin]\nport = 0\ntoken_env = "ADMIN"\n'
        '[audit]\npostgres_url_env = "AUDIT_DB"\n',
    )
    assert load_config(path).secret_values() == {
        "env:GW_TEST_SECRET": ENV_VALUE,
        "value:backends[0].env.B": "literal-1234",
        "env:HS": "hs256-key-value",
        "env:ADMIN": "admin-token-value",
        "env:AUDIT_DB.password": "db-pass!word",
        "backends[1].url.password": "url-pass-word",
    }


def test_a_reference_that_cannot_be_read_names_what_it_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GW_UNSET", raising=False)
    monkeypatch.setenv("GW_EMPTY", "")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "big").write_text("x" * (MAX_FILE_BYTES + 1))
    (tmp_path / "binary").write_bytes(b"\xff\xfe secret")
    (tmp_path / "folder").mkdir()
    (tmp_path / "nul").write_bytes(b"abc\x00defghij")
    (tmp_path / "multi").write_text("line-one\nline-two")
    os.mkfifo(tmp_path / "fifo")
    path = write(
        tmp_path,
        BACKEND + 'env = { A = { env = "GW_UNSET" }, B = { env = "GW_EMPTY" }, C = { file = "missing" },'
        ' D = { file = "empty" }, E = { file = "big" }, F = { file = "binary" }, G = { file = "folder" },'
        ' H = { file = "fifo" }, I = { file = "/dev/zero" }, J = { file = "nul" } }\n'
        '[[backends]]\nname = "r"\nurl = "ws://127.0.0.1:1/mcp"\nheaders = { K = { file = "multi" } }\n'
        'headers_env = { L = "GW_UNSET" }\n',
    )
    folder = tmp_path.resolve()
    not_regular = "not a regular file (a FIFO, a device or a socket); give a file holding the secret"
    assert problems_of(path) == {
        "backends[0].env.A": "environment variable GW_UNSET is not set or empty",
        "backends[0].env.B": "environment variable GW_EMPTY is not set or empty",
        "backends[0].env.C": f"secret file 'missing' ({folder}/missing) does not exist",
        "backends[0].env.D": f"secret file 'empty' ({folder}/empty) is empty",
        "backends[0].env.E": f"secret file 'big' ({folder}/big): larger than {MAX_FILE_BYTES} bytes;"
        " not read",
        "backends[0].env.F": f"secret file 'binary' ({folder}/binary) is not UTF-8 text",
        "backends[0].env.G": f"secret file 'folder' ({folder}/folder) is a directory",
        "backends[0].env.H": f"secret file 'fifo' ({folder}/fifo): {not_regular}",
        "backends[0].env.I": f"secret file '/dev/zero': {not_regular}",
        "backends[0].env.J": "file:nul holds a NUL character, which an environment variable cannot carry",
        "backends[1].headers.K": "file:multi holds a line break or a control character, which an HTTP header"
        " cannot carry",
        "backends[1].headers_env.L": "environment variable GW_UNSET is not set or empty",
    }


def test_a_malformed_reference_is_named_by_its_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        BACKEND + 'args = ["--token", { env = "X" }]\n'
        'env = { A = { env = "X", file = "y" }, B = {}, C = { vaule = "x" }, D = { env = 5 },'
        ' E = { value = "" }, F = { env = "A=B" }, G = 7, "H=I" = "x", J = { env = "A\\nB" } }\n',
    )
    forms = '({ env = "NAME" }, { file = "/run/credentials/..." } or { value = "..." })'
    problems = problems_of(path)
    assert problems == {
        "backends[0].args": "item 1 is a secret reference, which is not taken here: a stdio backend gets a"
        " secret through its env (its command line is readable by every local user), never its args",
        "backends[0].env": "'H=I' is not a valid environment variable name",
        "backends[0].env.A": f"a secret reference sets exactly one of env, file and value {forms}",
        "backends[0].env.B": f"a secret reference sets exactly one of env, file and value {forms}",
        "backends[0].env.C": f"unknown key 'vaule' in a secret reference {forms}",
        "backends[0].env.D": "env: expected a string",
        "backends[0].env.E": "value: must not be empty",
        "backends[0].env.F": "env: 'A=B' is not a valid environment variable name",
        "backends[0].env.G": f"expected a string or a secret {forms}, got an integer",
        "backends[0].env.J": "env: 'A\\nB' is not a valid environment variable name",
    }


def test_check_exits_2_with_the_key_and_never_the_value(
    sources: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GW_TEST_SECRET")
    (sources.parent / "creds" / "token").unlink()
    code = main(["check", "--config", str(sources)])
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG_ERROR
    assert f"{sources}: backends[0].env.A: environment variable GW_TEST_SECRET is not set or empty" in err
    assert f"{sources}: backends[1].headers.Authorization: secret file 'creds/token'" in err
    assert LITERAL not in err and "Traceback" not in err


def test_check_warns_of_what_weakens_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "open").write_text(FILE_VALUE)
    (tmp_path / "open").chmod(0o644)
    (tmp_path / "closed").write_text(FILE_VALUE)
    (tmp_path / "closed").chmod(0o600)
    path = write(
        tmp_path,
        BACKEND
        + f'env = {{ A = {{ file = "open" }}, B = {{ file = "closed" }}, C = {{ value = "{LITERAL}" }},'
        ' D = { value = "short" }, GITHUB_TOKEN = "ghp_plain", LOG_LEVEL = "debug" }\n'
        '[[backends]]\nname = "r"\nurl = "https://user:pass-word@mcp.example/mcp"\n'
        'headers = { Authorization = "Bearer plain", X-Team = "tools" }\n',
    )
    code = main(["check", "--config", str(path)])
    captured = capsys.readouterr()
    warnings = [line.removeprefix(f"{path}: ") for line in captured.err.splitlines()]
    forms = '{ env = "NAME" } or { file = "..." }'
    plain = f"a plain string; if it is a credential, write it as {forms}, kept out of logs"
    literal = f"a secret written in the config file: whoever reads the file has it; prefer {forms}"
    assert code == 0 and captured.out.strip() == f"{path.resolve()}: ok (2 backends)"
    assert warnings == [
        "backends[0].env.A: warning: secret file 'open' may be read by its group or others (mode 0644):"
        " chmod 600 it",
        f"backends[0].env.C: warning: {literal}",
        f"backends[0].env.D: warning: {literal}",
        "backends[0].env.D: warning: value:backends[0].env.D is shorter than 8 characters: the redactor does"
        " not look for it",
        f"backends[0].env.GITHUB_TOKEN: warning: {plain}",
        f"backends[1].headers.Authorization: warning: {plain}",
        "backends[1].url: warning: holds a password; send the credential in headers, as a secret reference",
    ]
    assert FILE_VALUE not in captured.err and LITERAL not in captured.err


def test_a_reload_reads_every_reference_again_and_a_changed_value_restarts_its_backend(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = load_config(sources)
    assert diff(before, load_config(sources)).nothing
    (sources.parent / "creds" / "token").write_text("file-secret-rotated")
    after = load_config(sources)
    assert revealed(after.backends[1].headers)["Authorization"] == "file-secret-rotated"
    assert diff(before, after).changed == ("a", "r")  # both use the file
    monkeypatch.setenv("GW_TEST_SECRET", "env-secret-rotated")
    assert diff(after, load_config(sources)).changed == ("a", "r")


def test_the_secret_type_is_ready_for_any_table(tmp_path: Path) -> None:
    """What outbound auth (`auth.secret`) will use: the converter structures any field typed Secret."""
    from actors.config.converter import make_converter

    converter = make_converter()
    assert converter.structure({"env": "TOKEN"}, Secret) == Secret(SecretSource.ENV, "TOKEN")
    with pytest.raises(TypeError, match="expected a secret reference"):
        converter.structure("plain", Secret)


def test_the_examples_commented_out_remote_backend_with_secret_headers_is_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_MCP_AUTH", "Bearer remote-token-1234")
    monkeypatch.setenv("REMOTE_MCP_KEY", "remote-key-5678")
    lines = (Path(__file__).resolve().parents[3] / "config" / "example.toml").read_text().splitlines()
    start = lines.index('# name = "remote"') - 1
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    (tmp_path / "remote.toml").write_text("\n".join(block) + "\n")
    (remote,) = load_config(tmp_path / "remote.toml").backends
    assert {name: repr(value) for name, value in remote.headers.items()} == {
        "X-Team": "'tools'",
        "Authorization": "Secret(env:REMOTE_MCP_AUTH)",
        "X-Key": "Secret(env:REMOTE_MCP_KEY)",
    }
    assert revealed(remote.headers)["Authorization"] == "Bearer remote-token-1234"
