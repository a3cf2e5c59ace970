"""The admin listener of a real gateway process with real backends: /healthz, /readyz (the first settle and
required backends), /metrics moving with calls and a crash, /status, its bearer token, and
`mcp-gateway status`. Every wait is on the admin's own event stream or on an answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import trio
from admin_support import AdminGateway, admin_gateway, backend_of, sample, with_admin
from support import DEADLINE_S, ROOT, backend_entry, fast_restarts, write_config

from actors.admin.app import MAX_EVENT_READERS

SLOW_RESTART = {"backoff_initial_s": 30.0, "backoff_max_s": 30.0}  # down for the rest of the test


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "gateway.log"


def status_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", "status", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=DEADLINE_S,
        check=False,
    )


async def call(gateway: AdminGateway, request_id: int, tool: str, **arguments: object) -> dict[str, object]:
    await gateway.client.call(request_id, tool, **arguments)
    return await gateway.client.answer_to(request_id)


async def test_readyz_waits_for_the_first_settle_and_the_required_backends(
    tmp_path: Path, log_file: Path
) -> None:
    gate = tmp_path / "held.gate"
    gate.touch()
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("steady", "--only=pid", required=True, restart=SLOW_RESTART),
            backend_entry("held", f"--hold-while={gate}", "--only=echo"),
            backend_entry("broken", "--crash-on-start", restart={"max_restarts": 0}),
        ],
    )
    async with admin_gateway(with_admin(config), log_file) as gateway:
        assert (await gateway.get("/healthz")).status_code == 200
        waiting = await gateway.get("/readyz")
        assert waiting.status_code == 503
        not_ready = {entry["backend"]: entry for entry in waiting.json()["not_ready"]}
        assert not_ready["held"]["settled"] is False and not_ready["held"]["state"] == "starting"
        gate.unlink()
        await gateway.wait_status(lambda status: status["gateway"]["ready"])
        ready = await gateway.get("/readyz")
        assert ready.status_code == 200, ready.text  # broken failed, but it is not required
        assert ready.json() == {"ready": True, "settled": True}

        os.kill(backend_of(await gateway.status(), "steady")["pid"], signal.SIGKILL)  # the required one
        await gateway.wait_status(lambda status: backend_of(status, "steady")["state"] == "restarting")
        down = await gateway.get("/readyz")
        assert down.status_code == 503
        (entry,) = down.json()["not_ready"]
        assert entry["backend"] == "steady" and entry["required"] and entry["state"] == "restarting"
        assert (await gateway.get("/healthz")).text == "ok\n"


async def test_metrics_move_with_calls_and_a_crash(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", "--only=add,rpc_error,crash", restart=fast_restarts())],
    )
    async with admin_gateway(with_admin(config), log_file) as gateway:
        await gateway.client.initialize()
        for request_id in range(3):
            assert "result" in await call(gateway, request_id, "add", a=1, b=2)
        assert "error" in await call(gateway, 10, "rpc_error", code=-32042, message="no")
        metrics = await gateway.metrics()
        add = {"backend": "alpha", "method": "tools/call", "tool": "add"}
        assert sample(metrics, "mcp_gateway_calls_total", **add) == 3
        assert sample(metrics, "mcp_gateway_call_duration_seconds_count", **add) == 3
        assert sample(metrics, "mcp_gateway_call_duration_seconds_bucket", **add, le="+Inf") == 3
        assert sample(metrics, "mcp_gateway_call_errors_total", tool="rpc_error", code="-32042") == 1
        assert sample(metrics, "mcp_gateway_call_errors_total", tool="add") is None
        assert sample(metrics, "mcp_gateway_sessions", frontend="stdio") == 1
        assert (sample(metrics, "mcp_gateway_client_bytes_total", frontend="stdio", direction="in") or 0) > 0
        assert (sample(metrics, "mcp_gateway_backend_bytes_total", backend="alpha", direction="out") or 0) > 0
        assert sample(metrics, "mcp_gateway_backend_state", backend="alpha", state="ready") == 1
        assert sample(metrics, "mcp_gateway_backend_restarts_total", backend="alpha") == 0
        assert sample(metrics, "mcp_gateway_inflight_requests", backend="alpha") == 0
        assert sample(metrics, "mcp_gateway_ready") == 1

        crashed = await call(gateway, 20, "crash")
        assert crashed["error"]["code"] == -32000  # type: ignore[index]
        await gateway.wait_status(
            lambda status: (
                backend_of(status, "alpha")["restarts"] == 1
                and backend_of(status, "alpha")["state"] == "ready"
            )
        )
        metrics = await gateway.metrics()
        assert sample(metrics, "mcp_gateway_backend_restarts_total", backend="alpha") == 1
        assert sample(metrics, "mcp_gateway_call_errors_total", tool="crash", code="-32000") == 1
        assert sample(metrics, "mcp_gateway_calls_total", **add) == 3
        assert "process_resident_memory_bytes" in metrics  # the process collector, in the gateway's registry


async def test_status_json_and_the_status_command(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", "--only=pid,crash", restart=fast_restarts(), required=True),
            backend_entry("beta", "--only=echo"),
        ],
        name="admin-test",
    )
    async with admin_gateway(with_admin(config), log_file) as gateway:
        await gateway.client.initialize()
        answer = await call(gateway, 1, "pid")
        first_pid = answer["result"]["structuredContent"]["pid"]  # type: ignore[index]
        status = await gateway.status()
        assert status["gateway"]["name"] == "admin-test" and status["gateway"]["ready"] is True
        assert status["frontends"] == [
            {"name": "stdio", "url": None, "session_count": 1, "sessions": ["stdio"]}
        ]
        alpha = backend_of(status, "alpha")
        assert alpha["pid"] == first_pid and alpha["state"] == "ready" and alpha["required"] is True
        assert alpha["restarts"] == 0 and alpha["last_error"] is None and alpha["tools"] == 2
        assert alpha["uptime_s"] >= 0 and alpha["calls"] == 1

        await call(gateway, 2, "crash", code=7)
        status = await gateway.wait_status(
            lambda status: (
                backend_of(status, "alpha")["restarts"] == 1
                and backend_of(status, "alpha")["state"] == "ready"
            )
        )
        alpha = backend_of(status, "alpha")
        assert alpha["pid"] != first_pid
        assert "code 7" in alpha["last_error"]["reason"]
        assert [change["state"] for change in alpha["history"]][-3:] == ["ready", "restarting", "ready"]

        printed = await trio.to_thread.run_sync(status_command, "--url", gateway.url)
        assert printed.returncode == 0, printed.stderr
        lines = printed.stdout.splitlines()
        assert lines[0].startswith("gateway admin-test 0.1.0: ready, pid ")
        assert "│   └── stdio: 1 session" in lines
        assert any(
            line.startswith(f"    ├── alpha (required): ready, pid {alpha['pid']}, up ") for line in lines
        )
        assert any("1 restart, 2 tools" in line for line in lines)
        assert any("last error: " in line and "code 7" in line for line in lines)
        assert "    └── beta: ready" in "\n".join(lines)


async def test_the_admin_token_and_the_host_check(tmp_path: Path, log_file: Path) -> None:
    config = with_admin(
        write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")]),
        token_env="ADMIN_TOKEN",
    )
    secret = "s3cret-admin-token"
    async with admin_gateway(config, log_file, env={"ADMIN_TOKEN": secret}) as gateway:
        for path in ("/healthz", "/readyz", "/metrics", "/status", "/events"):
            refused = await gateway.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "bearer token is required" in refused.json()["error"]
        wrong = await gateway.get("/status", authorization="Bearer nope")
        assert wrong.status_code == 401 and wrong.json() == {"error": "wrong bearer token"}
        page = await gateway.get("/")
        assert page.status_code == 200 and "<title>" in page.text  # the static page carries no data
        gateway.token = secret
        assert (await gateway.get("/healthz")).status_code == 200
        assert (await gateway.status())["backends"][0]["name"] == "alpha"
        rebound = await gateway.get("/status", host="attacker.example")
        assert rebound.status_code == 421
        async with httpx2.AsyncClient() as http:
            posted = await http.post(gateway.url + "/status", headers=gateway.headers)
        assert posted.status_code == 405

        no_token = await trio.to_thread.run_sync(status_command, "--url", gateway.url)
        assert no_token.returncode == 1 and no_token.stdout == ""
        assert no_token.stderr.strip().endswith("needs its bearer token (set MCP_GATEWAY_ADMIN_TOKEN)")
        with_token = await trio.to_thread.run_sync(
            lambda: status_command("--url", gateway.url, env={"MCP_GATEWAY_ADMIN_TOKEN": secret})
        )
        assert with_token.returncode == 0 and "alpha: ready" in with_token.stdout


async def test_status_of_a_gateway_that_is_not_running(tmp_path: Path) -> None:
    config = with_admin(write_config(tmp_path / "gateway.toml", [backend_entry("alpha")]))
    config.write_text(config.read_text().replace("port = 0", "port = 9"))  # discard: nobody listens there
    printed = await trio.to_thread.run_sync(status_command, "--config", str(config))
    assert printed.returncode == 1 and printed.stdout == ""
    assert printed.stderr == (
        "mcp-gateway status: no gateway is running at http://127.0.0.1:9"
        " (connection refused or unreachable)\n"
    )
    bare = write_config(tmp_path / "bare.toml", [backend_entry("alpha")])
    no_admin = await trio.to_thread.run_sync(status_command, "--config", str(bare))
    assert no_admin.returncode == 2
    assert no_admin.stderr.strip().endswith("no [admin] table, so the gateway has no admin listener")


def test_a_non_loopback_admin_needs_a_token(tmp_path: Path) -> None:
    config = with_admin(write_config(tmp_path / "gateway.toml", [backend_entry("alpha")]), host="0.0.0.0")
    checked = subprocess.run(
        [sys.executable, "-m", "actors", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=DEADLINE_S,
        check=False,
    )
    assert checked.returncode == 2
    assert checked.stderr.startswith(f"{config}: admin.token_env: required when host is not loopback")
    assert len(checked.stderr.splitlines()) == 1


async def test_event_readers_past_the_cap_get_503_and_healthz_still_answers(
    tmp_path: Path, log_file: Path
) -> None:
    config = with_admin(write_config(tmp_path / "gateway.toml", [backend_entry("alpha", "--only=echo")]))
    async with admin_gateway(config, log_file) as gateway:
        host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
        request = f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        readers = []
        try:
            with trio.fail_after(DEADLINE_S):
                for _ in range(MAX_EVENT_READERS):  # readers that read nothing past the answer's start
                    reader = await trio.open_tcp_stream(host, int(port))
                    readers.append(reader)
                    await reader.send_all(request)
                    assert (await reader.receive_some(64)).startswith(b"HTTP/1.1 200")
            refused = await gateway.get("/events")
            assert refused.status_code == 503 and "too many event streams" in refused.json()["error"]
            assert refused.headers["retry-after"] == "10"
            assert (await gateway.get("/healthz")).status_code == 200
        finally:
            for reader in readers:
                await reader.aclose()
