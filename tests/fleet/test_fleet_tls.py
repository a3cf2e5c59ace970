"""[fleet] over TLS, with real redis-servers speaking TLS only (certificates of a CA made for the test):
rediss:// checked against redis_ca_file, a Redis that asks for a client certificate (redis_cert_file +
redis_key_file), rediss+cluster:// and rediss+sentinel://. Two replicas share a session through each."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
from fleet_support import (
    HEADERS,
    RedisLike,
    RedisServer,
    echo,
    fleet_tls,
    open_on,
    replica_config,
    two_replicas,
)
from redis_topologies import ClusterSetup, SentinelSetup, redis_cli
from support import DEADLINE_S, running
from tls_certs import Pki


async def _shared(http: httpx2.AsyncClient, alpha: Any, beta: Any, text: str) -> None:
    """A session opened on alpha answers on beta: its facts went through Redis."""
    assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
    assert alpha.fleet.store.available and beta.fleet.store.available, alpha.fleet.store.reason
    own = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
    answer = await http.post(beta.http_url, json=echo(2, text), headers=own)
    assert answer.status_code == 200 and answer.json()["result"]["content"][0]["text"] == text, answer.text


async def _share_a_session(tmp_path: Path, redis: RedisLike, fleet: dict[str, str], text: str) -> None:
    async with (
        two_replicas(tmp_path, redis, fleet) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        await _shared(http, alpha, beta, text)


async def test_two_replicas_share_a_session_through_rediss_checked_against_redis_ca_file(
    tmp_path: Path, redis_tls_server: RedisServer, redis_pki: Pki
) -> None:
    assert redis_tls_server.url.startswith("rediss://")
    await _share_a_session(tmp_path, redis_tls_server, fleet_tls(redis_pki, client=False), "over tls")
    held = redis_cli(redis_tls_server.port, "--scan", "--pattern", "mcp-gateway:session:*", tls=redis_pki)
    assert held.strip(), "the session's facts are in the TLS Redis"


async def test_a_redis_that_asks_for_a_client_certificate_refuses_a_replica_without_one(
    tmp_path: Path, redis_mtls_server: RedisServer, redis_pki: Pki
) -> None:
    """Beta names the CA but no client certificate: the server refuses it, beta serves alone and /status
    says why; alpha, with the certificate, shares state through the same Redis."""
    beta_config = replica_config(
        tmp_path / "b", redis_mtls_server, "beta", fleet_tls(redis_pki, client=False)
    )
    beta_config.write_text(beta_config.read_text() + "\n[admin]\nport = 0\n")
    async with (
        running(replica_config(tmp_path / "a", redis_mtls_server, "alpha", fleet_tls(redis_pki))) as alpha,
        running(beta_config) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.fleet and beta.fleet and beta.admin and beta.http_url
        assert alpha.fleet.store.available, alpha.fleet.store.reason
        assert not beta.fleet.store.available
        status = (await http.get(f"{beta.admin.url}/status")).json()["fleet"]
        assert (status["redis"], status["serving"]) == ("unavailable", "alone")
        # the server's alert read ("certificate required"), or the link reset before it was: the likely why
        assert (
            "certificate required" in status["reason"] or "(none given: redis_cert_file" in status["reason"]
        )
        session_id = await open_on(http, beta.http_url)  # alone, it still serves its own sessions
        own = {**HEADERS, "mcp-session-id": session_id}
        assert (await http.post(beta.http_url, json=echo(2, "alone"), headers=own)).status_code == 200


async def test_two_replicas_share_a_session_through_a_redis_cluster_over_tls(
    tmp_path: Path, redis_tls_cluster: ClusterSetup, redis_pki: Pki
) -> None:
    assert redis_tls_cluster.url.startswith("rediss+cluster://")
    await _share_a_session(tmp_path, redis_tls_cluster, fleet_tls(redis_pki), "through a tls cluster")


async def test_two_replicas_share_a_session_through_a_sentinel_service_over_tls(
    tmp_path: Path, redis_tls_sentinel: SentinelSetup, redis_pki: Pki
) -> None:
    assert redis_tls_sentinel.url.startswith("rediss+sentinel://")
    await _share_a_session(tmp_path, redis_tls_sentinel, fleet_tls(redis_pki), "through tls sentinels")
    held = redis_cli(
        redis_tls_sentinel.primary.port, "--scan", "--pattern", "mcp-gateway:session:*", tls=redis_pki
    )
    assert held.strip(), "the session's facts are on the primary the sentinel names"


async def test_a_redis_whose_certificate_does_not_name_the_url_host_is_refused(
    tmp_path: Path, redis_tls_server: RedisServer, redis_pki: Pki
) -> None:
    """The certificate names 127.0.0.1 only: reached as `localhost`, the name check refuses it (a CA alone is
    not enough), and the replica serves alone saying so."""
    by_name = SimpleNamespace(url=f"rediss://localhost:{redis_tls_server.port}/0")
    config = replica_config(tmp_path / "a", by_name, "alpha", fleet_tls(redis_pki, client=False))
    async with running(config) as alpha:
        assert alpha.fleet and not alpha.fleet.store.available
        assert "CERTIFICATE_VERIFY_FAILED" in alpha.fleet.store.reason, alpha.fleet.store.reason
