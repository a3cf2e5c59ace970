"""Redis set up as operators run it for a fleet, from real redis-server processes: a Sentinel service (a
primary, a replica, one sentinel) and a 3-node Redis Cluster, each over TLS when given a `tls` (every link:
clients, replication, the cluster bus, the sentinel's). Each has the `url` a [fleet] table names."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Final

from fleet_support import RedisServer, ServerStartError, free_port, tls_options
from tls_certs import Pki

SERVICE: Final = "fleet-primary"
READY_S: Final = 15.0  # a cluster agreeing on its slots, a sentinel seeing the replica
# A sentinel reads each server's INFO every 10 s: until it has read the replica's own, SENTINEL FAILOVER is
# refused (NOGOODSLAVE: the test used to go on and wait for a demotion that never came), and a failover's
# steps follow those reads.
DEMOTED_S: Final = 45.0


def redis_cli(port: int, *command: str, tls: Pki | None = None) -> str:
    """One command by redis-cli (the distribution's, beside redis-server), its answer as text; over TLS
    with `tls`' CA and client certificate."""
    cli = shutil.which("redis-cli") or "redis-cli"
    secure = ["--tls", "--cacert", str(tls.ca)] if tls else []
    if tls:
        secure += ["--cert", str(tls.client_certificate), "--key", str(tls.client_key)]
    done = subprocess.run(
        [cli, "-h", "127.0.0.1", "-p", str(port), *secure, *command],
        capture_output=True,
        text=True,
        timeout=10,
    )
    return done.stdout + done.stderr


def _until(what: str, passes: object, within_s: float = READY_S) -> None:
    """Poll `passes()` (an outside process's state: nothing to wait on but its answers) up to `within_s`."""
    deadline = time.monotonic() + within_s
    while not passes():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise ServerStartError(f"not ready within {within_s}s: {what}")
        time.sleep(0.05)


class SentinelServer(RedisServer):
    """redis-server in sentinel mode, watching `primary` as SERVICE (quorum 1, a failover within seconds)."""

    ready_line = b"+monitor master"  # a sentinel never says "Ready to accept connections"

    def __init__(self, binary: str, folder: Path, primary: RedisServer, tls: Pki | None = None) -> None:
        super().__init__(binary, folder)
        self.conf = folder / f"sentinel-{self.port}.conf"
        listen = f"port {self.port}\n"
        if tls:  # the options as config lines, and its links to the servers over TLS too
            options = tls_options(tls, self.port, require_client=False)
            pairs = zip(options[::2], options[1::2], strict=True)
            listen = "".join(f"{name[2:]} {value}\n" for name, value in pairs) + "tls-replication yes\n"
        self.conf.write_text(
            f"{listen}bind 127.0.0.1\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} 500\n"
            f"sentinel failover-timeout {SERVICE} 3000\n"
        )

    def argv(self) -> list[str]:
        return [self.binary, str(self.conf), "--sentinel"]


class _Topology:
    """Several servers started together: one that fails to start stops the ones already running."""

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class SentinelSetup(_Topology):
    """A primary, its replica and a sentinel; `url` is the fleet's redis+sentinel:// URL."""

    def __init__(self, binary: str, folder: Path, tls: Pki | None = None) -> None:
        self.tls = tls
        over_tls = ("--tls-replication", "yes") if tls else ()
        self.primary = RedisServer(
            binary, folder / "primary", ("--repl-diskless-sync-delay", "0", *over_tls), tls=tls
        )
        self.replica = RedisServer(
            binary,
            folder / "replica",
            ("--replicaof", "127.0.0.1", str(self.primary.port), *over_tls),
            tls=tls,
        )
        self.sentinel = SentinelServer(binary, folder, self.primary, tls)

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}+sentinel://127.0.0.1:{self.sentinel.port}/{SERVICE}/0"

    def _start(self) -> None:
        for server in (self.primary, self.replica):
            server.folder.mkdir(exist_ok=True)
            server.start()
        _until(
            "replica in sync",
            lambda: (
                "master_link_status:up" in redis_cli(self.replica.port, "info", "replication", tls=self.tls)
            ),
        )
        self.sentinel.start()

    def wait_replica_known(self) -> None:
        """Until the sentinel lists the replica (from the primary's INFO, polled every few seconds): a
        failover needs it. Only the failover tests wait for it."""
        _until(
            "sentinel knows the replica",
            lambda: (
                str(self.replica.port)
                in redis_cli(self.sentinel.port, "sentinel", "replicas", SERVICE, tls=self.tls)
            ),
        )

    def failover(self) -> None:
        """SENTINEL FAILOVER, asked again until the sentinel takes it: until it has read the replica's own
        INFO (every 10 s; it lists the replica earlier, from the primary's) it answers NOGOODSLAVE."""
        _until(
            "the sentinel takes SENTINEL FAILOVER",
            lambda: (
                redis_cli(self.sentinel.port, "SENTINEL", "FAILOVER", SERVICE, tls=self.tls).strip() == "OK"
            ),
            DEMOTED_S,
        )

    def wait_demoted(self, port: int) -> None:
        """Until the server on `port` says it is a replica (after a failover that kept it alive)."""
        _until(
            "the old primary demoted",
            lambda: redis_cli(port, "role", tls=self.tls).split()[:1] == ["slave"],
            DEMOTED_S,
        )

    def primary_port(self) -> int:
        answer = redis_cli(self.sentinel.port, "sentinel", "get-master-addr-by-name", SERVICE, tls=self.tls)
        answer = answer.split()
        return int(answer[1])

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.primary):
            server.stop()


class ClusterSetup(_Topology):
    """Three cluster-enabled redis-servers (bus ports chosen free too) made one cluster, no replicas; `url`
    is the fleet's redis+cluster:// URL naming two of them (the client finds the third)."""

    def __init__(self, binary: str, folder: Path, tls: Pki | None = None) -> None:
        self.tls = tls
        self.nodes = []
        for number in range(3):
            node_folder = folder / f"node{number}"
            node_folder.mkdir(exist_ok=True)
            extra = (
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                str(free_port()),
                "--cluster-node-timeout",
                "2000",
                *(("--tls-cluster", "yes") if tls else ()),
            )
            self.nodes.append(RedisServer(binary, node_folder, extra, tls=tls))

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}+cluster://127.0.0.1:{self.nodes[0].port},127.0.0.1:{self.nodes[1].port}"

    def _start(self) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        made = redis_cli(
            self.nodes[0].port,
            *("--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"),
            tls=self.tls,
        )
        if "[OK] All 16384 slots covered" not in made:
            raise ServerStartError(f"redis-cli --cluster create: {made[-300:]}")
        for node in self.nodes:
            _until(
                f"cluster ok on {node.port}",
                lambda n=node: "cluster_state:ok" in redis_cli(n.port, "cluster", "info", tls=self.tls),
            )

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
