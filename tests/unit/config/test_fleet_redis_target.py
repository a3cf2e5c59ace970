"""[fleet]'s URL names one Redis, a Sentinel service or a Cluster; `check` names a bad one as
FILE: fleet.redis_url(_env): reason, never the password; under a Cluster every key shares one hash tag."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import pytest

from actors.cli import EXIT_CONFIG_ERROR, main
from actors.config import load_config
from actors.config.redis_target import parse_redis_target

KEY_A: Final = "A" * 43
BACKEND: Final = f'[[backends]]\nname = "t"\ncommand = "{sys.executable}"\n'


def config(tmp_path: Path, url: str, key: str = "redis_url") -> Path:
    (tmp_path / "k").write_text(KEY_A)
    path = tmp_path / "g.toml"
    path.write_text(f'{BACKEND}\n[fleet]\n{key} = "{url}"\nkeys_file = "k"\nreplica = "r1"\n')
    return path


def test_sentinel_url_names_its_sentinels_service_database_and_password() -> None:
    target = parse_redis_target("redis+sentinel://:s%40cret@10.0.0.1:26379,[::1]:26380/main/2")
    assert (target.kind, target.service, target.db, target.password) == ("sentinel", "main", 2, "s@cret")
    assert target.nodes == (("10.0.0.1", 26379), ("::1", 26380))
    assert "s@cret" not in repr(target)


def test_cluster_url_names_its_seed_nodes() -> None:
    target = parse_redis_target("redis+cluster://app:pw@h1:7000,h2:7001")
    assert (target.kind, target.nodes, target.username, target.password) == (
        "cluster",
        (("h1", 7000), ("h2", 7001)),
        "app",
        "pw",
    )


def test_under_a_cluster_every_fleet_key_shares_the_prefix_hash_tag(tmp_path: Path) -> None:
    loaded = load_config(config(tmp_path, "redis+cluster://127.0.0.1:7000"))
    assert loaded.fleet is not None and loaded.fleet.key_prefix == "{mcp-gateway}"
    single = load_config(config(tmp_path, "redis://127.0.0.1:6379"))
    assert single.fleet is not None and single.fleet.key_prefix == "mcp-gateway"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis+sentinel://h:26379", "must name the Sentinel service"),
        ("redis+sentinel://:pw@h:26379/svc/db", "only a database number"),
        ("redis+sentinel://h/svc", "'h' is not host:port"),
        ("redis+sentinel://h:99999/svc", "has no port from 1 to 65535"),
        ("redis+cluster://h:7000/3", "a cluster URL names no database"),
        ("redis+cluster://h:7000?x=1", "takes no query"),
        ("redis+cluster://h:7000,h\\u0007:7001", "without spaces or control characters"),
        ("memcached://h", "must start with redis://, rediss://, unix://, redis+sentinel://"),
        ("redis+cluster://" + ",".join(f"h:{n}" for n in range(1, 40)), "more than 16 nodes"),
    ],
)
def test_bad_redis_url_names_file_key_and_reason_never_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str, reason: str
) -> None:
    path = config(tmp_path, url)
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err
    assert f"{path}: fleet.redis_url: " in err and reason in err and "Traceback" not in err, err
    monkeypatch.setenv("FLEET_URL", url.replace("\\u0007", "\x07").replace("pw@", "hunter2@"))
    path = config(tmp_path, "FLEET_URL", key="redis_url_env")
    assert main(["check", "--config", str(path)]) == EXIT_CONFIG_ERROR
    err = capsys.readouterr().err
    assert f"{path}: fleet.redis_url_env: the value of FLEET_URL " in err and reason in err, err
    assert "hunter2" not in err
