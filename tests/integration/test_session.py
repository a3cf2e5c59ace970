"""The gateway end to end: `mcp-gateway serve --stdio` as a subprocess, driven by the official MCP SDK client
over real pipes, in front of real backend processes (the project's test backend and mcp-server-time)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from mcp import MCPError
from mcp.types import PromptReference, ResourceTemplateReference
from support import (
    Notifications,
    backend_entry,
    fast_restarts,
    read_log,
    sdk_client,
    started_pids,
    tool_names,
    write_config,
)

TEST_TOOLS = ["echo", "add", "sleep", "crash", "pid", "fail", "rpc_error", "progress"]


def only(*tools: str) -> str:
    return "--only=" + ",".join(tools)


def marks(event: trio.Event) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """A progress callback that sets `event`: the call is running at its backend."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        event.set()

    return on_progress


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "gateway.log"


async def test_full_session_with_the_test_backend_and_mcp_server_time(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", only(*TEST_TOOLS), "--instructions", "alpha's own advice"),
            {
                "name": "time",
                "command": "mcp-server-time",
                "args": ["--local-timezone", "UTC"],
                "env": {"TZ": "UTC"},
            },
        ],
        name="integration-gateway",
    )
    async with sdk_client(config, log_file) as client:
        assert client.server_info is not None and client.server_info.name == "integration-gateway"
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.tools is not None and capabilities.tools.list_changed
        assert client.instructions is not None and "alpha's own advice" in client.instructions

        listed = await client.list_tools(cache_mode="bypass")
        by_name = {tool.name: tool for tool in listed.tools}
        assert set(by_name) == {*TEST_TOOLS, "get_current_time", "convert_time"}
        assert by_name["echo"].input_schema["required"] == ["text"]  # passed through untouched
        assert by_name["echo"].output_schema is not None

        echoed = await client.call_tool("echo", {"text": "hello"})
        assert echoed.content[0].text == "hello"  # type: ignore[union-attr]
        assert echoed.structured_content == {"text": "hello"}
        assert not echoed.is_error

        failed = await client.call_tool("fail", {"message": "a tool-level failure"})
        assert failed.is_error and failed.content[0].text == "a tool-level failure"  # type: ignore[union-attr]

        with pytest.raises(MCPError) as backend_error:
            await client.call_tool("rpc_error", {"code": -32099, "message": "the backend's own error"})
        assert backend_error.value.error.code == -32099
        assert backend_error.value.error.message == "the backend's own error"

        now = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not now.is_error
        assert "UTC" in now.content[0].text  # type: ignore[union-attr]

        await client.send_ping()

    log = read_log(log_file)
    assert "[backend=alpha]" in log and "[backend=time]" in log


async def test_unknown_tool_is_invalid_params(tmp_path: Path, log_file: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", only("echo"))])
    async with sdk_client(config, log_file) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.error.code == -32602
        assert "no_such_tool" in unknown.value.error.message


async def test_collisions_are_prefixed_by_config_order(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", only("echo", "pid")), backend_entry("beta", only("echo", "pid", "add"))],
    )
    async with sdk_client(config, log_file) as client:
        assert sorted(await tool_names(client)) == ["add", "beta__echo", "beta__pid", "echo", "pid"]
        alpha_pid = (await client.call_tool("pid", {})).structured_content
        beta_pid = (await client.call_tool("beta__pid", {})).structured_content
        assert alpha_pid != beta_pid  # two different processes answered
        assert (await client.call_tool("beta__echo", {"text": "to beta"})).structured_content == {
            "text": "to beta"
        }


async def test_always_prefix_names_every_tool(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml", [backend_entry("alpha", only("echo", "add"))], tool_names="always-prefix"
    )
    async with sdk_client(config, log_file) as client:
        assert sorted(await tool_names(client)) == ["alpha__add", "alpha__echo"]
        added = await client.call_tool("alpha__add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}


async def test_concurrent_calls_get_their_own_answers(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", only("echo", "sleep")), backend_entry("beta", only("add"))],
    )
    answers: dict[int, object] = {}
    async with sdk_client(config, log_file) as client:

        async def echo(n: int) -> None:
            answers[n] = (await client.call_tool("echo", {"text": f"message {n}"})).structured_content

        async def add(n: int) -> None:
            answers[1000 + n] = (await client.call_tool("add", {"a": n, "b": 1000})).structured_content

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(echo, n)
                nursery.start_soon(add, n)
    assert answers == {
        **{n: {"text": f"message {n}"} for n in range(40)},
        **{1000 + n: {"sum": n + 1000} for n in range(40)},
    }


async def test_a_slow_call_blocks_neither_pings_nor_other_calls(tmp_path: Path, log_file: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", only("echo", "sleep"))])
    async with sdk_client(config, log_file) as client:
        slow_done = trio.Event()

        async def slow() -> None:
            await client.call_tool("sleep", {"seconds": 600})
            slow_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await client.send_ping()
            assert (await client.call_tool("echo", {"text": "meanwhile"})).structured_content == {
                "text": "meanwhile"
            }
            assert not slow_done.is_set()
            nursery.cancel_scope.cancel()  # the SDK sends notifications/cancelled; the gateway passes it on
        await client.send_ping()  # the session is still healthy after the cancellation


async def test_progress_notifications_reach_the_caller(tmp_path: Path, log_file: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", only("progress"))])
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with sdk_client(config, log_file) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert result.content[0].text == "done 3"  # type: ignore[union-attr]
    assert [(p, t) for p, t, _ in updates] == [(1, 3), (2, 3), (3, 3)]


async def test_a_crash_mid_call_is_answered_and_the_backend_comes_back(
    tmp_path: Path, log_file: Path
) -> None:
    state, gate = tmp_path / "alpha.state", tmp_path / "alpha.hold"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry(
                "alpha",
                only("echo", "progress", "crash", "pid"),
                f"--state-file={state}",
                f"--hold-while={gate}",
                restart=fast_restarts(),
            ),
            backend_entry("beta", only("echo", "add", "progress")),
        ],
    )
    notifications = Notifications()
    async with sdk_client(config, log_file, notifications) as client:
        before = sorted(await tool_names(client))
        assert before == ["add", "beta__echo", "beta__progress", "crash", "echo", "pid", "progress"]
        first_pid = started_pids(state)[0]

        in_flight = trio.Event()
        outcomes: dict[str, object] = {}

        async def long_call(tool: str) -> None:
            try:
                await client.call_tool(
                    tool, {"steps": 1000, "delay": 0.05}, progress_callback=marks(in_flight)
                )
                outcomes[tool] = "answered"
            except MCPError as exc:
                outcomes[tool] = exc.error

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call, "progress")
            await in_flight.wait()  # alpha is working on the call
            beta_working = trio.Event()

            async def beta_call() -> None:
                result = await client.call_tool(
                    "beta__progress", {"steps": 60, "delay": 0.05}, progress_callback=marks(beta_working)
                )
                outcomes["beta"] = result.content[0].text  # type: ignore[union-attr]

            nursery.start_soon(beta_call)
            await beta_working.wait()
            gate.touch()  # alpha's next start waits for the test to look at the gateway while it is down
            with pytest.raises(MCPError) as crash_error:
                await client.call_tool("crash", {"code": 9})
        error = outcomes["progress"]
        assert isinstance(error, type(crash_error.value.error))
        assert (
            error.code == -32000 and "alpha" in error.message
        )  # the in-flight call was answered, naming alpha
        assert "alpha" in crash_error.value.error.message
        assert outcomes["beta"] == "done 60"  # beta went on untouched through alpha's crash

        await notifications.wait_for("notifications/tools/list_changed", 1)
        assert sorted(await tool_names(client)) == ["add", "beta__echo", "beta__progress"]
        with pytest.raises(MCPError) as down:
            await client.call_tool("echo", {"text": "anyone?"})
        assert down.value.error.code == -32000
        assert "alpha" in down.value.error.message and "restarting" in down.value.error.message
        assert (await client.call_tool("beta__echo", {"text": "still here"})).structured_content == {
            "text": "still here"
        }

        gate.unlink()  # let alpha finish starting
        await notifications.wait_for("notifications/tools/list_changed", 2)
        assert sorted(await tool_names(client)) == before  # the same public names as before the crash
        second_pid = (await client.call_tool("pid", {})).structured_content
        assert second_pid == {"pid": started_pids(state)[-1]} and second_pid != {"pid": first_pid}
        assert (await client.call_tool("echo", {"text": "back"})).structured_content == {"text": "back"}

    log = read_log(log_file)
    assert "[backend=alpha]" in log and "exit" in log


async def test_a_backend_over_its_restart_budget_is_failed_and_the_gateway_serves_on(
    tmp_path: Path, log_file: Path
) -> None:
    state = tmp_path / "alpha.state"
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry(
                "alpha",
                only("echo", "crash"),
                f"--state-file={state}",
                "--crash-after-starts=1",  # starts once, then every restart crashes
                restart=fast_restarts(max_restarts=2),
            ),
            backend_entry("beta", only("add")),
        ],
    )
    notifications = Notifications()
    async with sdk_client(config, log_file, notifications) as client:
        assert sorted(await tool_names(client)) == ["add", "crash", "echo"]
        with pytest.raises(MCPError):
            await client.call_tool("crash", {})
        await notifications.wait_for("notifications/tools/list_changed", 1)
        assert await tool_names(client) == ["add"]
        with trio.fail_after(30):
            while True:  # the failed state itself does not change the tool list, so ask until it shows
                with pytest.raises(MCPError) as down:
                    await client.call_tool("echo", {"text": "x"})
                if (down.value.error.data or {}).get("state") == "failed":
                    break
                await trio.sleep(0.05)
        assert down.value.error.code == -32000 and "alpha" in down.value.error.message
        assert "failed" in down.value.error.message
        assert len(started_pids(state)) == 1 + 2  # the first start and two restarts; the third crash fails it
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"sum": 3}
    assert "alpha" in read_log(log_file)


async def test_a_backend_that_never_starts_does_not_stop_the_gateway(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            {
                "name": "ghost",
                "command": "no-such-program-anywhere",
                "restart": fast_restarts(max_restarts=1),
            },
            backend_entry(
                "hung",
                only("echo"),
                "--hang-on-initialize",
                startup_timeout_s=0.5,
                restart={"policy": "temporary"},
            ),
            backend_entry("beta", only("add")),
        ],
    )
    async with sdk_client(config, log_file) as client:
        assert await tool_names(client) == ["add"]
        assert (await client.call_tool("add", {"a": 2, "b": 2})).structured_content == {"sum": 4}
    log = read_log(log_file)
    assert "[backend=ghost]" in log and "no-such-program-anywhere" in log and "not found" in log
    assert "[backend=hung]" in log and "within 0.5s" in log


async def test_tools_changed_by_a_backend_reach_the_client(tmp_path: Path, log_file: Path) -> None:
    config = write_config(tmp_path / "gateway.toml", [backend_entry("alpha", only("echo", "set_tools"))])
    notifications = Notifications()
    async with sdk_client(config, log_file, notifications) as client:
        await client.call_tool("set_tools", {"extra": ["dynamic_one"]})
        await notifications.wait_for("notifications/tools/list_changed", 1)
        assert sorted(await tool_names(client)) == ["dynamic_one", "echo", "set_tools"]
        assert (await client.call_tool("dynamic_one", {"text": "new"})).structured_content == {"text": "new"}


if sys.platform != "linux":  # process-group and /proc checks are Linux-specific
    pytestmark = pytest.mark.skip(reason="Linux only")


async def test_prompts_are_aggregated_named_and_routed_like_tools(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [backend_entry("alpha", only("echo"), "--prompts"), backend_entry("beta", only("add"), "--prompts")],
    )
    async with sdk_client(config, log_file) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.prompts is not None
        listed = await client.list_prompts(cache_mode="bypass")
        assert [prompt.name for prompt in listed.prompts] == [
            "greet",
            "summarize",
            "beta__greet",
            "beta__summarize",
        ]
        assert listed.prompts[0].title == "Greeting" and listed.prompts[0].arguments[0].required
        mine = await client.get_prompt("greet", {"who": "Ada"})
        assert mine.messages[0].content.text == "[alpha] Hello, Ada!"  # type: ignore[union-attr]
        theirs = await client.get_prompt("beta__greet", {"who": "Bob"})
        assert theirs.messages[0].content.text == "[beta] Hello, Bob!"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("no_such_prompt", {})
        assert unknown.value.error.code == -32602


async def test_resources_are_aggregated_and_read_from_their_owner(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", only("echo"), "--resources"),
            backend_entry("beta", only("add"), "--resources"),
        ],
    )
    async with sdk_client(config, log_file) as client:
        listed = await client.list_resources(cache_mode="bypass")
        uris = [str(resource.uri) for resource in listed.resources]
        assert uris == ["test://alpha/readme", "test://shared", "test://beta/readme", "beta+test://shared"]
        templates = await client.list_resource_templates(cache_mode="bypass")
        assert [t.uri_template for t in templates.resource_templates] == [
            "test://{owner}/items/{id}",
            "beta+test://{owner}/items/{id}",  # the same template from a later backend: prefixed
        ]

        async def text_of(uri: str) -> tuple[str, str]:
            read = await client.read_resource(uri)
            return str(read.contents[0].uri), read.contents[0].text  # type: ignore[union-attr]

        assert await text_of("test://shared") == ("test://shared", "[alpha] test://shared")
        assert await text_of("beta+test://shared") == ("beta+test://shared", "[beta] test://shared")
        assert await text_of("test://beta/readme") == ("test://beta/readme", "[beta] test://beta/readme")
        assert await text_of("test://x/items/7") == (
            "test://x/items/7",
            "[alpha] test://x/items/7",
        )  # template
        assert await text_of("beta+test://x/items/8") == ("beta+test://x/items/8", "[beta] test://x/items/8")
        with pytest.raises(MCPError) as missing:
            await client.read_resource("other://nothing")
        assert missing.value.error.code == -32002


async def test_completions_are_routed_by_their_ref(tmp_path: Path, log_file: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [
            backend_entry("alpha", only("echo"), "--prompts", "--resources"),
            backend_entry("beta", only("add"), "--prompts", "--resources"),
        ],
    )
    async with sdk_client(config, log_file) as client:
        theirs = await client.complete(
            PromptReference(type="ref/prompt", name="beta__greet"), {"name": "who", "value": "A"}
        )
        assert theirs.completion.values == ["A-from-beta-for-greet"]  # beta saw its own prompt name
        template = ResourceTemplateReference(type="ref/resource", uri="beta+test://{owner}/items/{id}")
        by_template = await client.complete(template, {"name": "id", "value": "7"})
        assert by_template.completion.values == ["7-from-beta-for-test://{owner}/items/{id}"]
        mine = await client.complete(
            PromptReference(type="ref/prompt", name="greet"), {"name": "who", "value": "B"}
        )
        assert mine.completion.values == ["B-from-alpha-for-greet"]
        with pytest.raises(MCPError) as unknown:
            await client.complete(PromptReference(type="ref/prompt", name="nope"), {"name": "x", "value": ""})
        assert unknown.value.error.code == -32602
