"""A legacy HTTP session behind a balancer with no stickiness: whatever its client sends may land on any
replica. Two gateways share a real redis-server; the official SDK client (raw HTTP where an id or a status
is the point) sends each message to the replica the test picks, never the one that needs it:
notifications/initialized away from the owner that waits for it, an answer to a backend's elicitation or
sampling away from the replica that asked, a cancel away from the replica running the call. And two
requests arriving together at a replica without a copy, and a Redis that comes back empty."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Final

import httpx2
import mcp_types as types
import orjson
import pytest
import trio
from fleet_support import (
    HEADERS,
    ByMessage,
    RedisServer,
    echo,
    kind_of,
    open_on,
    port_of,
    replica_config,
    two_replicas,
)
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, INITIALIZE, running, sampler, sse_events

import actors.fleet.states
from actors.frontends.http import fleet_sessions
from actors.gateway import Gateway

ELICITING: Final = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {}}}}
INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def ada(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def sessions_of(gateway: Gateway) -> Any:
    assert gateway.http_listener is not None
    return gateway.http_listener._sessions


def call(request_id: int, tool: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_initialized_sent_to_another_replica_reaches_the_owner_that_waits_for_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The owner's copy ends a session whose client has not said initialized within
    initialize_timeout_s: the notification landing elsewhere must reach it (and make no copy there)."""
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        ports = {"notification": port_of(beta)}
        balancer = ByMessage(lambda message: ports.get(kind_of(message), port_of(alpha)))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=balancer, timeout=DEADLINE_S) as http,
                Client(streamable_http_client(alpha.http_url, http_client=http), mode="legacy") as client,
            ):
                result = await client.call_tool("echo", {"text": "served"})
                assert result.content[0].text == "served"  # type: ignore[union-attr]
                (entry,) = sessions_of(alpha).values()
                assert entry.session._dispatcher is not None
                await entry.session._dispatcher.client_ready.wait()  # never, before: it closed at 30 s
                assert entry.session.initialize_deadline() == math.inf
                assert not sessions_of(beta)  # a notification makes no copy of its session


@pytest.mark.parametrize(("calls_on", "answers_on"), [("alpha", "beta"), ("beta", "alpha")])
async def test_an_elicitation_answered_on_another_replica_reaches_the_replica_that_asked(
    tmp_path: Path, redis_server: RedisServer, calls_on: str, answers_on: str
) -> None:
    """The session is opened on alpha; its calls land on `calls_on` (beta: a copy taken up there asks), the
    client's answers to the backend's elicitation on `answers_on`."""
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        by_name = {"alpha": port_of(alpha), "beta": port_of(beta)}
        ports = {"initialize": by_name["alpha"], "answer": by_name[answers_on]}
        balancer = ByMessage(lambda message: ports.get(kind_of(message), by_name[calls_on]))
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=balancer, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(alpha.http_url, http_client=http),
                    mode="legacy",
                    elicitation_callback=ada,
                ) as client,
            ):
                for _ in range(2):  # the second: ids unique, nothing left of the first
                    result = await client.call_tool("ask_name", {})  # hung before: the answer was dropped
                    assert not result.is_error, result
                    assert result.content[0].text == "Hello, Ada"  # type: ignore[union-attr]


async def test_a_sampling_answered_on_another_replica_reaches_the_replica_that_asked(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.http_url is not None
        balancer = ByMessage(lambda m: port_of(alpha) if kind_of(m) == "answer" else port_of(beta))
        prompt = {"role": "user", "content": {"type": "text", "text": "hello"}}
        asked = {"method": "sampling/createMessage", "params": {"messages": [prompt], "maxTokens": 5}}
        with trio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(transport=balancer, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(beta.http_url or "", http_client=http),
                    mode="legacy",
                    sampling_callback=sampler("model"),
                ) as client,
            ):
                answer = await client.call_tool("ask_client", asked)
                assert answer.structured_content["result"]["content"]["text"] == "model answers hello"  # type: ignore[index]


async def test_an_answer_no_replica_asked_of_its_session_is_refused_and_reaches_no_session(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A backend asks the client of session `asked`; the answer's id, sent under another session, altered,
    or a bare number, is refused 400 on the other replica; the right one, there too, completes the call."""
    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url
        sessions = []
        for _ in range(2):
            response = await http.post(alpha.http_url, json=ELICITING, headers=HEADERS)
            own = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"]}
            assert (await http.post(alpha.http_url, json=INITIALIZED, headers=own)).status_code == 202
            sessions.append(own)
        asked, other = sessions
        results: list[Any] = []
        with trio.fail_after(DEADLINE_S):
            body = orjson.dumps(call(7, "ask_name", {}))
            async with http.stream("POST", alpha.http_url, content=body, headers=asked) as stream:
                async for event in sse_events(stream):
                    message = orjson.loads(event["data"]) if event.get("data") else {}
                    if message.get("method") == "elicitation/create":
                        ask_id = message["id"]
                        assert isinstance(ask_id, str) and ask_id.isascii()
                        content = {"action": "accept", "content": {"name": "Eve"}}
                        flipped = ask_id[:12] + ("A" if ask_id[12] != "A" else "B") + ask_id[13:]
                        for headers, wrong_id in ((other, ask_id), (asked, flipped), (asked, 1)):
                            wrong = {"jsonrpc": "2.0", "id": wrong_id, "result": content}
                            refused = await http.post(beta.http_url, json=wrong, headers=headers)
                            assert refused.status_code == 400, refused.text
                            assert "answers no request" in refused.json()["error"]["message"]
                        right = {"jsonrpc": "2.0", "id": ask_id, "result": content}
                        taken = await http.post(beta.http_url, json=right, headers=asked)
                        assert taken.status_code == 202, taken.text
                    elif "result" in message:
                        results.append(message["result"])
        assert [result["content"][0]["text"] for result in results] == ["Hello, Eve"]
        assert not sessions_of(beta)  # no copy was made to take an answer


@pytest.mark.parametrize(("call_on", "cancel_on"), [("alpha", "beta"), ("beta", "alpha")])
async def test_a_cancel_sent_to_another_replica_reaches_the_call_where_it_runs(
    tmp_path: Path, redis_server: RedisServer, call_on: str, cancel_on: str
) -> None:
    """The session is alpha's; the call runs on `call_on` (beta: a copy), the cancel lands on `cancel_on`
    (beta without a copy; alpha with its own): the call's POST ends unanswered and its backend hears it."""
    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        url = {"alpha": alpha.http_url or "", "beta": beta.http_url or ""}
        own = {**HEADERS, "mcp-session-id": await open_on(http, url["alpha"])}
        assert (await http.post(url["alpha"], json=INITIALIZED, headers=own)).status_code == 202
        statuses: list[int] = []
        with trio.fail_after(DEADLINE_S):
            body = orjson.dumps(call(5, "progress", {"steps": 2, "delay": 60}, token="c"))
            async with http.stream("POST", url[call_on], content=body, headers=own) as response:
                async for event in sse_events(response):
                    if event.get("data"):  # running at the backend: cancel it elsewhere
                        cancel = {"requestId": 5, "reason": "changed my mind"}
                        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
                        statuses.append(
                            (await http.post(url[cancel_on], json=notice, headers=own)).status_code
                        )
            statuses.append(response.status_code)  # the stream ended, with no answer on it
            assert statuses == [202, 200]
            cancelled: list[Any] = []
            while not cancelled:  # the backend is a process of its own: asked until it has heard
                answer = await http.post(url[call_on], json=call(8, "cancelled_requests", {}), headers=own)
                cancelled = answer.json()["result"]["structuredContent"]["cancelled"]
                if not cancelled:
                    await trio.sleep(0.05)
        assert len(cancelled) == 1


async def test_requests_arriving_together_at_a_replica_without_a_copy_wait_for_its_replayed_initialize(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request takes the session up on beta; the second comes while the initialize is replayed
    (held here until the second has either been answered or waits): it must wait, not get -32002."""
    replaying, release, second_in = trio.Event(), trio.Event(), trio.Event()
    replay = fleet_sessions._replay

    async def held(*args: Any) -> None:
        replaying.set()
        await release.wait()
        await replay(*args)

    monkeypatch.setattr(fleet_sessions, "_replay", held)

    class Watched(dict[str, trio.Event]):
        def get(self, key: str, default: Any = None) -> Any:
            found = super().get(key, default)
            if found is not None:
                second_in.set()  # a request waits on the take-up under way
            return found

    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url
        sessions_of(beta).taking_up = Watched()
        own = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
        answers: dict[int, Any] = {}

        async def post(number: int) -> None:
            response = await http.post(beta.http_url or "", json=echo(number, f"call {number}"), headers=own)
            answers[number] = response.json()
            second_in.set()  # answered: the replay may go on either way

        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(post, 2)
                await replaying.wait()
                nursery.start_soon(post, 3)
                await second_in.wait()
                release.set()
        for number in (2, 3):
            assert answers[number].get("result", {}).get("content") == [
                {"type": "text", "text": f"call {number}"}
            ], answers[number]


async def test_a_replica_registers_again_as_soon_as_redis_is_seen_empty(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its URL is how retries and answers are forwarded to it: after a Redis that restarted empty, found
    again at once, not at the next refresh (kept out of the way here)."""
    monkeypatch.setattr(actors.fleet.states, "REGISTER_EVERY_S", 3600.0)
    async with two_replicas(tmp_path, redis_server) as (alpha, beta):
        assert alpha.fleet is not None and beta.fleet is not None
        assert await beta.fleet.states.owner_url("alpha") == alpha.http_url
        caught_up = trio.Event()

        async def after_catch_up() -> None:
            caught_up.set()

        alpha.fleet.store.on_back.append(after_catch_up)
        await alpha.fleet.store.command(lambda client: client.flushall())
        with trio.fail_after(DEADLINE_S):
            await caught_up.wait()
        assert await beta.fleet.states.owner_url("alpha") == alpha.http_url  # None for up to 5 s before


async def test_an_answer_for_a_replica_gone_or_reached_in_a_loop_is_refused_502(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The replica that asked has stopped (its calls and asks ended with it): 502 naming it, not 202 and a
    silent loss. And an answer already forwarded once by a replica is never forwarded again (a registered
    URL that reaches the wrong replica would loop)."""
    async with (
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert beta.http_url and beta.fleet
        async with running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha:
            assert alpha.http_url and alpha.fleet
            session_id = await open_on(http, alpha.http_url)
            ask_id = alpha.fleet.sessions.ask_ids(session_id).outward(1)
        own = {**HEADERS, "mcp-session-id": session_id}
        answer = orjson.dumps({"jsonrpc": "2.0", "id": ask_id, "result": {"action": "decline"}})
        gone = await http.post(beta.http_url, content=answer, headers=own)
        assert gone.status_code == 502 and "alpha" in gone.json()["error"]["message"], gone.text
        hopped = {**own, "mcp-gateway-forwarded": beta.fleet.states.sign(answer)}
        looped = await http.post(beta.http_url, content=answer, headers=hopped)
        assert looped.status_code == 502 and "forwarded once" in looped.json()["error"]["message"]
