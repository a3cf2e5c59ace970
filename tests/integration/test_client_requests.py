"""Requests from backends to clients (sampling, elicitation, roots) through a real gateway: official SDK
clients with real callbacks over real WebSockets, real backend processes, several sessions at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp import Client
from sdk_websocket import websocket_client
from support import DEADLINE_S, backend_entry, running, sampler, with_websocket, write_config

ASK = "ask_client"


def sampling_request(text: str) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": 10,
        },
    }


async def ask(
    client: Client, tool: str, method: str, params: dict[str, Any] | None = None, **more: Any
) -> Any:
    """Have the backend send `method` to the client; the backend's view of the answer."""
    result = await client.call_tool(tool, {"method": method, "params": params or {}, **more})
    assert not result.is_error, result
    return result.structured_content


async def test_sampling_goes_to_the_client_whose_call_asked_for_it(tmp_path: Path) -> None:
    backends = [backend_entry("alpha", f"--only={ASK}"), backend_entry("beta", f"--only={ASK}")]
    config = with_websocket(write_config(tmp_path / "g.toml", backends))
    a_entered, b_entered = trio.Event(), trio.Event()
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            websocket_client(url, sampling_callback=sampler("A", a_entered, release=b_entered)) as a,
            websocket_client(url, sampling_callback=sampler("B", b_entered)) as b,
        ):
            answers: dict[str, Any] = {}

            async def call(name: str, client: Client, tool: str) -> None:
                answers[name] = await ask(client, tool, **sampling_request(f"from {name}"))

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:  # both in flight at once, on different backends
                    nursery.start_soon(call, "A", a, ASK)
                    nursery.start_soon(call, "B", b, f"beta__{ASK}")
            assert answers["A"]["result"]["content"]["text"] == "A answers from A"
            assert answers["A"]["result"]["model"] == "model-of-A"
            assert answers["B"]["result"]["content"]["text"] == "B answers from B"
            # Now B alone asks alpha, which A just used: it is B's call, so B's client answers.
            again = await ask(b, ASK, **sampling_request("again"))
            assert again["result"]["content"]["text"] == "B answers again"


async def test_elicitation_in_form_and_url_mode_and_its_completion_notice(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", f"--only={ASK}")]))
    seen: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url, elicitation_callback=elicit) as client:
            form = {
                "mode": "form",
                "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
            answer = await ask(client, ASK, "elicitation/create", form)
            assert answer["result"] == {"action": "accept", "content": {"name": "Ada"}}
            url_mode = {
                "mode": "url",
                "message": "Sign in",
                "url": "https://example.com/x",
                "elicitationId": "e1",
            }
            answer = await ask(client, ASK, "elicitation/create", url_mode)
            assert answer["result"] == {"action": "accept"}
            assert [type(p).__name__ for p in seen] == ["ElicitRequestFormParams", "ElicitRequestURLParams"]


async def test_a_client_without_the_capability_is_not_asked(tmp_path: Path) -> None:
    entry = backend_entry("alpha", f"--only={ASK}", roots="client")  # else roots/list is refused for all
    config = with_websocket(write_config(tmp_path / "g.toml", [entry]))
    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url) as client:  # no callbacks: no capabilities
            for method, capability in [
                ("sampling/createMessage", "sampling"),
                ("elicitation/create", "elicitation"),
                ("roots/list", "roots"),
            ]:
                answer = await ask(client, ASK, method, sampling_request("x")["params"])
                assert answer["error"]["code"] == -32601
                assert f"did not declare the {capability} capability" in answer["error"]["message"]


async def test_roots_come_only_from_a_client_alone_and_a_change_of_client_is_announced(
    tmp_path: Path,
) -> None:
    """roots = "client": the backend's roots are every session's, so only a session that is alone answers
    its roots/list; a session's roots/list_changed reaches it only from that session; and when the session
    that may answer changes, the backend is told its roots changed (so nobody's roots outlive them)."""
    entry = backend_entry("alpha", f"--only={ASK}", roots="client")
    config = with_websocket(write_config(tmp_path / "g.toml", [entry]))
    roots = {"A": ["file:///a"], "B": ["file:///b"]}
    asked = {"A": 0, "B": 0}
    logged: list[Any] = []
    changed = trio.Event()

    def lister(name: str) -> Any:
        async def list_roots(context: Any) -> types.ListRootsResult:
            asked[name] += 1
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in roots[name]])  # type: ignore[arg-type]

        return list_roots

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        nonlocal changed
        logged.append(params.data)  # the backend relisted its roots: what it got back
        changed.set()
        changed = trio.Event()

    async def relisted(count: int) -> Any:
        with trio.fail_after(DEADLINE_S):
            while len(logged) < count:
                await changed.wait()
        return logged[count - 1]

    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with websocket_client(url, list_roots_callback=lister("A"), logging_callback=on_log) as a:
            answer = await ask(a, ASK, "roots/list")
            assert [root["uri"] for root in answer["result"]["roots"]] == ["file:///a"]
            async with websocket_client(url, list_roots_callback=lister("B")) as b:
                refused = await relisted(1)  # b joined: the backend was told, and asked again
                assert refused["error"]["code"] == -32601
                assert "2 client sessions are connected" in refused["error"]["message"]
                await b.send_roots_list_changed()  # not passed on: b is not alone
                answer = await ask(a, ASK, "roots/list")  # nor is a, though it is the one calling
                assert "2 client sessions are connected" in answer["error"]["message"]
            again = await relisted(2)  # b left: a is alone again, and answers
            assert [root["uri"] for root in again["result"]["roots"]] == ["file:///a"]
            assert asked == {"A": 2, "B": 0}
            assert len(logged) == 2  # b's list_changed never reached the backend


async def test_a_request_that_could_be_for_either_of_two_sessions_is_refused(tmp_path: Path) -> None:
    config = with_websocket(
        # a backend whose requests carry no trace context (as a TypeScript SDK server's): nothing says whose
        write_config(
            tmp_path / "g.toml", [backend_entry("alpha", f"--only={ASK},sleep", "--no-trace-context")]
        )
    )
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            websocket_client(url, sampling_callback=sampler("A")) as a,
            websocket_client(url, sampling_callback=sampler("B")) as b,
            trio.open_nursery() as nursery,
        ):
            sleeping = trio.Event()

            async def sleep_in_a() -> None:
                sleeping.set()
                await a.call_tool("sleep", {"seconds": 3600})

            nursery.start_soon(sleep_in_a)
            await sleeping.wait()
            with trio.fail_after(DEADLINE_S):
                while True:  # until a's call has reached the backend
                    answer = await ask(b, ASK, **sampling_request("whose?"))
                    if "error" in answer:
                        break
            assert answer["error"]["code"] == -32601
            assert "ambiguous" in answer["error"]["message"]
            nursery.cancel_scope.cancel()


async def test_a_request_the_backend_withdraws_is_cancelled_at_the_client(tmp_path: Path) -> None:
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", f"--only={ASK}")]))
    cancelled = trio.Event()

    async def never_answer(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async with running(config) as gateway:
        assert gateway.websocket_url is not None
        async with websocket_client(gateway.websocket_url, sampling_callback=never_answer) as client:
            answer = await ask(client, ASK, **sampling_request("slow"), timeout_s=0.5)
            assert answer["error"]["code"] == -32001
            with trio.fail_after(DEADLINE_S):
                await cancelled.wait()


async def test_two_clients_asking_at_once_through_one_backend_that_carries_trace_context(
    tmp_path: Path,
) -> None:
    """The backend carries each call's trace context into what it asks while serving it (the test backend
    does by default, as the Python SDK does): with A's and B's calls both asking on alpha at once, each
    request names its call, so each client answers its own."""
    config = with_websocket(write_config(tmp_path / "g.toml", [backend_entry("alpha", f"--only={ASK}")]))
    a_entered, b_answered = trio.Event(), trio.Event()
    async with running(config) as gateway:
        url = gateway.websocket_url
        assert url is not None
        async with (
            websocket_client(url, sampling_callback=sampler("A", a_entered, release=b_answered)) as a,
            websocket_client(url, sampling_callback=sampler("B", b_answered)) as b,
        ):
            answers: dict[str, Any] = {}

            async def a_asks() -> None:
                answers["A"] = await ask(a, ASK, **sampling_request("from A"))

            with trio.fail_after(DEADLINE_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(a_asks)
                    await a_entered.wait()  # A's question is open at its client while B's call asks
                    answers["B"] = await ask(b, ASK, **sampling_request("from B"))
    assert answers["A"]["result"]["content"]["text"] == "A answers from A"
    assert answers["B"]["result"]["content"]["text"] == "B answers from B"
