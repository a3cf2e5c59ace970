"""[fleet] over TLS: rediss://, rediss+sentinel:// and rediss+cluster:// with redis_ca_file and a client
certificate (redis_cert_file + redis_key_file), relative to the config file; `check` names a bad one as
FILE: fleet.redis_*_file: reason and exits non-zero, without a traceback."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path
from typing import Final

import pytest
from cryptography.hazmat.primitives import serialization
from tls_certs import Pki, make_pki

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import load_config
from actors.config.diff import diff
from actors.config.redis_target import parse_redis_target

KEY_A: Final = "A" * 43
BACKEND: Final = f'[[backends]]\nname = "t"\ncommand = "{sys.executable}"\n'


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    folder = tmp_path / "tls"
    folder.mkdir()
    return make_pki(folder)


def config(tmp_path: Path, url: str, **files: str) -> Path:
    (tmp_path / "k").write_text(KEY_A)
    path = tmp_path / "g.toml"
    keys = "".join(f'{key} = "{value}"\n' for key, value in files.items())
    path.write_text(f'{BACKEND}\n[fleet]\nredis_url = "{url}"\nkeys_file = "k"\nreplica = "r1"\n{keys}')
    return path


@pytest.mark.parametrize(
    ("url", "kind", "tls"),
    [
        ("rediss://h:6380/0", "single", True),
        ("redis://h:6379/0", "single", False),
        ("rediss+sentinel://:pw@h:26379,h2:26380/main/1", "sentinel", True),
        ("redis+sentinel://h:26379/main", "sentinel", False),
        ("rediss+cluster://h:7000,h:7001", "cluster", True),
        ("redis+cluster://h:7000", "cluster", False),
        ("unix:///run/redis.sock", "single", False),
    ],
)
def test_tls_schemes_are_read_as_their_form_over_tls(url: str, kind: str, tls: bool) -> None:
    target = parse_redis_target(url)
    assert (target.kind, target.tls) == (kind, tls)


def test_tls_files_are_read_relative_to_the_config_and_verification_stays_on(
    tmp_path: Path, pki: Pki
) -> None:
    files = {
        "redis_ca_file": "tls/ca.pem",
        "redis_cert_file": "tls/client.pem",
        "redis_key_file": "tls/client.key",
    }
    loaded = load_config(config(tmp_path, "rediss+cluster://127.0.0.1:7000", **files))
    assert loaded.fleet is not None and loaded.fleet.redis_tls is not None
    tls = loaded.fleet.redis_tls
    assert (tls.ca_file, tls.cert_file, tls.key_file) == (pki.ca, pki.client_certificate, pki.client_key)
    assert tls.context.check_hostname and tls.context.verify_mode == ssl.CERT_REQUIRED


def test_a_tls_url_without_files_checks_the_server_against_the_system_cas(tmp_path: Path) -> None:
    """coredis' own rediss:// context skips the name check: the fleet's never does."""
    loaded = load_config(config(tmp_path, "rediss://127.0.0.1:6380/0"))
    assert loaded.fleet is not None and loaded.fleet.redis_tls is not None
    assert loaded.fleet.redis_tls.context.check_hostname
    plain = load_config(config(tmp_path, "redis://127.0.0.1:6379/0"))
    assert plain.fleet is not None and plain.fleet.redis_tls is None


def test_a_reload_with_the_same_tls_files_changes_nothing(tmp_path: Path, pki: Pki) -> None:
    path = config(tmp_path, "rediss://127.0.0.1:6380/0", redis_ca_file="tls/ca.pem")
    assert diff(load_config(path), load_config(path)).needs_restart == ()


@pytest.mark.parametrize(
    ("url", "files", "key", "reason"),
    [
        ("rediss://h:1/0", {"redis_ca_file": "nowhere.pem"}, "redis_ca_file", "cannot read 'nowhere.pem' ("),
        ("rediss://h:1/0", {"redis_ca_file": "tls"}, "redis_ca_file", "Is a directory"),
        ("rediss://h:1/0", {"redis_ca_file": "tls/ca.key"}, "redis_ca_file", "is not PEM certificates"),
        ("rediss://h:1/0", {"redis_cert_file": "tls/client.pem"}, "redis_cert_file", "needs redis_key_file"),
        ("rediss://h:1/0", {"redis_key_file": "tls/client.key"}, "redis_key_file", "needs redis_cert_file"),
        (
            "rediss://h:1/0",
            {"redis_cert_file": "tls/client.pem", "redis_key_file": "tls/server.key"},
            "redis_key_file",
            "does not load with redis_cert_file",
        ),
        (
            "rediss://h:1/0",
            {"redis_cert_file": "tls/client.pem", "redis_key_file": "tls/client.pem"},
            "redis_key_file",
            "is not a PEM private key",
        ),
        ("redis://h:1/0", {"redis_ca_file": "tls/ca.pem"}, "redis_ca_file", "is for a TLS URL (rediss://"),
        ("redis+cluster://h:1", {"redis_ca_file": "tls/ca.pem"}, "redis_ca_file", "the URL is plain"),
        ("rediss://h:1/0?ssl_cert_reqs=none", {}, "redis_url", "takes no ssl_* query argument"),
        ("rediss://h:1/0?%73sl_check_hostname=false", {}, "redis_url", "takes no ssl_* query argument"),
    ],
)
def test_bad_tls_files_name_file_key_and_reason(
    tmp_path: Path,
    pki: Pki,
    capsys: pytest.CaptureFixture[str],
    url: str,
    files: dict[str, str],
    key: str,
    reason: str,
) -> None:
    path = config(tmp_path, url, **files)
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err
    assert f"{path}: fleet.{key}: " in err and reason in err and "Traceback" not in err, err


def test_a_ca_file_of_garbage_between_pem_marks_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n")
    path = config(tmp_path, "rediss://h:1/0", redis_ca_file="bad.pem")
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err
    assert f"{path}: fleet.redis_ca_file: does not load as CA certificates" in err and "Traceback" not in err


def test_an_encrypted_client_key_is_named_without_asking_for_a_passphrase(
    tmp_path: Path, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    key = serialization.load_pem_private_key(pki.client_key.read_bytes(), password=None)
    locked = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (tmp_path / "locked.key").write_bytes(locked)
    path = config(tmp_path, "rediss://h:1/0", redis_cert_file="tls/client.pem", redis_key_file="locked.key")
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err
    assert (
        f"{path}: fleet.redis_key_file: does not load with redis_cert_file" in err and "Traceback" not in err
    )
