"""The fleet under clients that push at its edges: a made-up forwarding signature, initializes that fail or
overflow a client's share, session ids a replica cannot take up for want of room, a session deleted while
Redis was out of reach, a retry refused at the limits, a registration in Redis that is no URL. Each gets a
clear answer, and leaves nothing behind in Redis or in a replica's tables."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
import trio
from fleet_support import HEADERS, RedisServer, echo, open_on, replica_config, two_replicas
from support import DEADLINE_S, INITIALIZE, running
from test_fleet_parked_calls import MODERN_HEADERS, modern_call

from actors.fleet.sessions import FleetSessions


@pytest.mark.parametrize("forged", ["a non-ASCII digit as its time", "a non-ASCII character as its tag"])
async def test_a_client_sending_a_forwarding_signature_of_its_own_gets_its_retry_served(
    tmp_path: Path, redis_server: RedisServer, forged: str
) -> None:
    """The header replicas sign a forwarded retry with, made up by a client: "²" as its time (a digit to
    `str.isdigit`, not to `int`), or a recent time and "é" as its tag (`hmac.compare_digest` takes ASCII
    text only). No signature: the retry is served as any other (each was a 500 and a traceback)."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url
        asked = await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)
        first = asked.json()["result"]
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        retry = modern_call(2, inputResponses=answers, requestState=first["requestState"])
        header = b"\xb2.0" if "time" in forged else f"{int(time.time())}.".encode() + b"\xe9"
        response = await http.post(
            alpha.http_url, json=retry, headers={**MODERN_HEADERS, "mcp-gateway-forwarded": header}
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["content"][0]["text"] == "Hello, Ada"
        replay = (await http.post(alpha.http_url, json=retry, headers=MODERN_HEADERS)).json()
        assert replay["error"]["code"] == -32602 and "used already" in replay["error"]["message"]


async def session_keys(gateway: Any) -> list[bytes]:
    """The session facts the fleet holds in Redis now."""
    pattern = f"{gateway.fleet.settings.key_prefix}:session:*"
    return sorted(await gateway.fleet.store.command(lambda client: client.keys(pattern)))


async def test_an_initialize_answered_with_an_error_leaves_no_facts_in_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Its client gets no session id, so nobody can take the session up: its facts (up to 64 KiB each)
    stayed in Redis for session_ttl_s, as many as a client sent such initializes."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and alpha.fleet
        failing = {**INITIALIZE, "params": {"capabilities": {}, "pad": "x" * 60_000}}  # no protocolVersion
        for _ in range(3):
            response = await http.post(alpha.http_url, json=failing, headers=HEADERS)
            assert response.status_code == 200 and response.json()["error"]["code"] == -32602
            assert "mcp-session-id" not in response.headers
        assert await session_keys(alpha) == []
        await open_on(http, alpha.http_url)
        assert len(await session_keys(alpha)) == 1  # a session that opened keeps its facts


async def test_a_take_up_refused_at_the_clients_share_keeps_nothing_of_the_session(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Beta reads a session's facts, then cannot open its copy (the client's one session there is busy: 429):
    what it kept for that copy (its id, its refresh time) stayed for good, one entry per session id a client
    sent there, as many as it could open on alpha."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta", max_sessions_per_client=1)) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and beta.fleet
        busy = await open_on(http, beta.http_url)
        get_headers = {"accept": "text/event-stream", "mcp-session-id": busy}
        with trio.fail_after(DEADLINE_S):
            async with http.stream("GET", beta.http_url, headers=get_headers) as stream:
                assert stream.status_code == 200
                for number in range(3):
                    elsewhere = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
                    refused = await http.post(beta.http_url, json=echo(number, "no room"), headers=elsewhere)
                    assert refused.status_code == 429, refused.text
        kept = beta.fleet.sessions
        assert set(kept._refreshed) == {busy} and set(kept._local.values()) == {busy}


WARDEN: Final = ("--user", "warden", "--pass", "warden-pw", "--no-auth-warning")  # the test's own Redis user


async def redis_cli(server: RedisServer, *args: str) -> None:
    await trio.run_process(["redis-cli", "-p", str(server.port), *args], capture_stdout=True)


async def test_a_session_deleted_while_redis_was_unreachable_is_not_taken_up_once_it_answers(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Redis kept the facts but alpha could not reach it (its user switched off) when the client deleted
    the session there: once Redis answered again, beta took the deleted session up from those facts, and
    whoever held its id was served under it for up to session_ttl_s."""
    async with (
        two_replicas(tmp_path, redis_server) as (alpha, beta),
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet and beta.fleet
        await redis_cli(redis_server, "ACL", "SETUSER", "warden", "on", ">warden-pw", "+@all", "~*", "&*")
        own = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
        await redis_cli(redis_server, *WARDEN, "ACL", "SETUSER", "default", "off")
        await redis_cli(redis_server, *WARDEN, "CLIENT", "KILL", "USER", "default")
        assert (await http.delete(alpha.http_url, headers=own)).status_code == 204
        assert not alpha.fleet.store.available
        await redis_cli(redis_server, *WARDEN, "ACL", "SETUSER", "default", "on")
        with trio.fail_after(DEADLINE_S):
            await alpha.fleet.store.wait_available()
            await beta.fleet.store.wait_available()
        response = await http.post(beta.http_url, json=echo(2, "deleted"), headers=own)
        assert response.status_code == 404, response.text


@pytest.mark.parametrize("landing", ["on its owner", "elsewhere, forwarded to its owner"])
async def test_a_retry_refused_for_want_of_a_session_may_be_made_again(
    tmp_path: Path, redis_server: RedisServer, landing: str
) -> None:
    """A modern retry that finds its owner's listener full (503, Retry-After) never reached its call: made
    again, it is served. The fleet had claimed its state first, so the retry the 503 asked for was 'used
    already' and the call was lost."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha", max_sessions=1)) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.http_listener
        retry_url = alpha.http_url if landing == "on its owner" else beta.http_url
        asked = await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)
        first = asked.json()["result"]
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        retry = modern_call(2, inputResponses=answers, requestState=first["requestState"])
        with trio.fail_after(DEADLINE_S):
            while alpha.http_listener._sessions._one_request:  # noqa: ASYNC110 (no event to wait on)
                await trio.sleep(0.01)
            busy = await open_on(http, alpha.http_url)
            get_headers = {"accept": "text/event-stream", "mcp-session-id": busy}
            async with http.stream("GET", alpha.http_url, headers=get_headers) as stream:
                assert stream.status_code == 200
                full = await http.post(retry_url, json=retry, headers=MODERN_HEADERS)
                assert full.status_code == 503 and full.headers["retry-after"], full.text
            # Made again until the listener has seen the stream end and the session's slot is free; each
            # refusal meanwhile (503, or -32000 "at its limit") frees the claim again, as the first did.
            while True:
                served = await http.post(retry_url, json=retry, headers=MODERN_HEADERS)
                if "at its limit" not in served.text:
                    break
                await trio.sleep(0.05)
        assert served.json().get("result", {}).get("content") == [{"type": "text", "text": "Hello, Ada"}], (
            served.text
        )


async def test_a_retry_whose_owner_is_registered_at_an_unusable_url_gets_the_start_over_error(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """What Redis holds is read as any input: an owner's registration that is no URL (here, too long for one)
    is an owner that does not answer, not a 500 and a traceback."""
    async with (
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert beta.http_url and beta.fleet
        async with running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha:
            assert alpha.http_url
            asked = await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)
            first = asked.json()["result"]
        registration = f"{beta.fleet.settings.key_prefix}:replica:alpha"
        await beta.fleet.store.command(lambda client: client.set(registration, "http://x/" + "x" * 70_000))
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        retry = modern_call(2, inputResponses=answers, requestState=first["requestState"])
        response = await http.post(beta.http_url, json=retry, headers=MODERN_HEADERS)
        assert response.status_code == 200, response.text
        assert response.json()["error"]["code"] == -32602


async def test_a_session_ended_to_make_room_on_the_replica_that_opened_it_ends_fleet_wide(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A client at its share on alpha opens one more session: its least recently active idle one ends, and
    its id gets 404 on every replica, as on a gateway alone. Its facts stayed in Redis, one more per
    initialize the client sent (a share that capped nothing in Redis), and any replica took it up again."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha", max_sessions_per_client=1)) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and alpha.fleet
        ended = {**HEADERS, "mcp-session-id": await open_on(http, alpha.http_url)}
        for _ in range(3):
            kept = await open_on(http, alpha.http_url)
        with trio.fail_after(DEADLINE_S):
            while len(await session_keys(alpha)) > 1:  # noqa: ASYNC110 (the deletes run beside the requests)
                await trio.sleep(0.01)
        for url in (beta.http_url, alpha.http_url):
            assert (await http.post(url, json=echo(2, "ended"), headers=ended)).status_code == 404
        own = {**HEADERS, "mcp-session-id": kept}
        assert (await http.post(beta.http_url, json=echo(3, "kept"), headers=own)).status_code == 200


async def test_a_request_waiting_on_a_take_up_that_found_no_room_is_not_told_its_session_is_gone(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests for a session alpha holds land on beta together, its listener full (busy): the first
    takes the session up and gets 503; the second, which waited on that take-up, got 404 (its client starts
    over, its session lost) though the session lives on. It gets the 503 too, and its client tries again."""
    gate = trio.Event()
    recall = FleetSessions.recall

    async def held(self: FleetSessions, session_id: str, principal: Any, route: Any = None) -> Any:
        await gate.wait()
        return await recall(self, session_id, principal, route)

    monkeypatch.setattr(FleetSessions, "recall", held)
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta", max_sessions=1)) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url and beta.http_listener
        busy = await open_on(http, beta.http_url)
        session_id = await open_on(http, alpha.http_url)
        own = {**HEADERS, "mcp-session-id": session_id}
        statuses: list[int] = []

        async def post(number: int) -> None:
            response = await http.post(beta.http_url, json=echo(number, "together"), headers=own)
            statuses.append(response.status_code)

        taking_up = beta.http_listener._sessions.taking_up
        get_headers = {"accept": "text/event-stream", "mcp-session-id": busy}
        with trio.fail_after(DEADLINE_S):
            async with http.stream("GET", beta.http_url, headers=get_headers) as stream:
                assert stream.status_code == 200
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(post, 2)
                    while session_id not in taking_up:  # noqa: ASYNC110 (no event to wait on)
                        await trio.sleep(0.01)
                    nursery.start_soon(post, 3)
                    while taking_up[session_id].statistics().tasks_waiting < 1:  # noqa: ASYNC110
                        await trio.sleep(0.01)
                    gate.set()
        assert statuses == [503, 503]


async def test_a_session_whose_facts_are_being_written_is_not_ended_to_make_room(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two initializes of a client at its share: the first's session waited, idle, while its facts went to
    Redis, and the second ended it to make room, so the first initialize was answered 404. As on a gateway
    alone, the first is served and the second refused (429), the first session being busy."""
    gate, calls = trio.Event(), []
    remember = FleetSessions.remember

    async def held(
        self: FleetSessions, session_id: str, principal: Any, initialize: Any, route: Any = None
    ) -> None:
        calls.append(session_id)
        if len(calls) == 1:  # the first initialize's facts: written once the second has come
            await gate.wait()
        await remember(self, session_id, principal, initialize, route)

    monkeypatch.setattr(FleetSessions, "remember", held)
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha", max_sessions_per_client=1)) as alpha,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and alpha.http_listener
        statuses: dict[str, int] = {}

        async def initialize(which: str) -> None:
            response = await http.post(alpha.http_url, json=INITIALIZE, headers=HEADERS)
            statuses[which] = response.status_code

        with trio.fail_after(DEADLINE_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(initialize, "first")
                while not alpha.http_listener._sessions:  # noqa: ASYNC110 (no event to wait on)
                    await trio.sleep(0.01)
                await initialize("second")
                gate.set()
        assert statuses == {"first": 200, "second": 429}


@pytest.mark.parametrize("landing", ["on its owner", "elsewhere"])
async def test_a_retry_that_is_not_the_states_request_leaves_the_state_good_for_the_one_that_is(
    tmp_path: Path, redis_server: RedisServer, landing: str
) -> None:
    """A retry with other arguments than the state was sealed for is refused as not this request's, as on a
    gateway alone, and the right retry after it is served: the fleet claimed the state first, so the
    mistaken retry spent it and the right one got 'used already'."""
    async with (
        running(replica_config(tmp_path / "a", redis_server, "alpha")) as alpha,
        running(replica_config(tmp_path / "b", redis_server, "beta")) as beta,
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
    ):
        assert alpha.http_url and beta.http_url
        url = alpha.http_url if landing == "on its owner" else beta.http_url
        first = (await http.post(alpha.http_url, json=modern_call(1), headers=MODERN_HEADERS)).json()[
            "result"
        ]
        ((key, _),) = first["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"name": "Ada"}}}
        state = first["requestState"]
        wrong = modern_call(2, arguments={"other": 1}, inputResponses=answers, requestState=state)
        refused = (await http.post(url, json=wrong, headers=MODERN_HEADERS)).json()["error"]
        assert refused["code"] == -32602 and "not this request's" in refused["message"]
        right = modern_call(3, inputResponses=answers, requestState=state)
        served = await http.post(url, json=right, headers=MODERN_HEADERS)
        assert served.json().get("result", {}).get("content") == [{"type": "text", "text": "Hello, Ada"}], (
            served.text
        )
