"""The fleet tier: several gateways sharing sessions through a real redis-server (the distribution's package,
installed by scripts/setup-fleet). Without it the tests skip, unless MCP_GATEWAY_REQUIRE_FLEET is set
(scripts/test sets it once setup-fleet succeeded): then they fail."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from fleet_support import PostgresServer, RedisServer, ServerStartError
from redis_topologies import ClusterSetup, SentinelSetup
from support import ROOT
from tls_certs import Pki, make_pki

SETUP: Final = ROOT / "scripts" / "setup-fleet"
INSTALL_DEADLINE_S: Final = 600.0  # apt-get on a cold machine; a stat or two once installed


def _unavailable(reason: str) -> None:
    if os.environ.get("MCP_GATEWAY_REQUIRE_FLEET"):
        pytest.fail(reason)
    pytest.skip(reason)


def _haproxy() -> str | None:
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)


@pytest.fixture(scope="session")
def haproxy_binary(redis_binary: str) -> str:
    """haproxy's path (installed with redis-server by scripts/setup-fleet)."""
    found = _haproxy()
    if found is None:
        _unavailable("haproxy is not installed (scripts/setup-fleet installs it)")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def redis_binary() -> str:
    """redis-server's path, installed by scripts/setup-fleet when missing (and possible)."""
    if shutil.which("redis-server") is None or _haproxy() is None:
        try:
            done = subprocess.run(
                [str(SETUP)], capture_output=True, text=True, timeout=INSTALL_DEADLINE_S, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"scripts/setup-fleet took more than {INSTALL_DEADLINE_S:.0f}s")
        if done.returncode != 0:
            _unavailable(f"scripts/setup-fleet exited {done.returncode}: {done.stderr.strip()}")
    found = shutil.which("redis-server")
    if found is None:
        _unavailable("redis-server is not installed (scripts/setup-fleet installs it)")
    assert found is not None
    return found


def _serving(server: RedisServer | PostgresServer | SentinelSetup | ClusterSetup) -> Iterator[None]:
    """`server` started (a start that fails fails the test) and stopped after."""
    try:
        server.start()
    except ServerStartError as exc:
        pytest.fail(str(exc))
    try:
        yield
    finally:
        server.stop()


@pytest.fixture
def redis_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server for one test, killed after it."""
    server = RedisServer(redis_binary, tmp_path)
    for _ in _serving(server):
        yield server


@pytest.fixture
def postgres_server(redis_binary: str) -> Iterator[PostgresServer]:
    """A real PostgreSQL server for one test (the distribution's binaries, a fresh cluster), stopped after."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        _unavailable("PostgreSQL is not installed (scripts/setup-fleet installs it)")
    server = PostgresServer(found[-1].parent)
    for _ in _serving(server):
        yield server


@pytest.fixture
def redis_sentinel(redis_binary: str, tmp_path: Path) -> Iterator[SentinelSetup]:
    """A Sentinel service of real processes (primary, replica, sentinel) for one test, killed after it."""
    setup = SentinelSetup(redis_binary, tmp_path)
    for _ in _serving(setup):
        yield setup


@pytest.fixture
def redis_cluster(redis_binary: str, tmp_path: Path) -> Iterator[ClusterSetup]:
    """A 3-node Redis Cluster of real processes for one test, killed after it."""
    setup = ClusterSetup(redis_binary, tmp_path)
    for _ in _serving(setup):
        yield setup


@pytest.fixture
def redis_pki(tmp_path: Path) -> Pki:
    """A CA made for one test, its server certificate (127.0.0.1) and client certificate."""
    folder = tmp_path / "pki"
    folder.mkdir()
    return make_pki(folder)


@pytest.fixture
def redis_tls_server(redis_binary: str, tmp_path: Path, redis_pki: Pki) -> Iterator[RedisServer]:
    """A redis-server speaking TLS only (its certificate from `redis_pki`), no client certificate asked."""
    server = RedisServer(redis_binary, tmp_path, tls=redis_pki)
    for _ in _serving(server):
        yield server


@pytest.fixture
def redis_mtls_server(redis_binary: str, tmp_path: Path, redis_pki: Pki) -> Iterator[RedisServer]:
    """A redis-server speaking TLS only that refuses a client without a certificate from `redis_pki`'s CA."""
    server = RedisServer(redis_binary, tmp_path, tls=redis_pki, require_client=True)
    for _ in _serving(server):
        yield server


@pytest.fixture
def redis_tls_cluster(redis_binary: str, tmp_path: Path, redis_pki: Pki) -> Iterator[ClusterSetup]:
    """A 3-node Redis Cluster over TLS (clients and the cluster bus)."""
    setup = ClusterSetup(redis_binary, tmp_path, redis_pki)
    for _ in _serving(setup):
        yield setup


@pytest.fixture
def redis_tls_sentinel(redis_binary: str, tmp_path: Path, redis_pki: Pki) -> Iterator[SentinelSetup]:
    """A Sentinel service over TLS: the primary, its replica and the sentinel all speak TLS only."""
    setup = SentinelSetup(redis_binary, tmp_path, redis_pki)
    for _ in _serving(setup):
        yield setup
