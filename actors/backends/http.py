"""A backend MCP server reached over Streamable HTTP (`url = "http(s)://..."` in [[backends]]), with the
gateway as the client (spec 2025-11-25, transports).

Each outgoing message is a POST. `initialize` is sent and answered before anything else goes out, so its
`Mcp-Session-Id` is on every later request, with the negotiated `MCP-Protocol-Version`. Other POSTs run
side by side; their answers (JSON, or the events of an SSE stream) come back as frames in arrival order.
After `notifications/initialized` a GET stream listens for what the server sends unasked.

The session is lost, and the backend actor's run ends as if a process had died, when the server answers
404 to the session id (it forgot the session: the supervisor's restart initializes a new one), when it
cannot be reached, or when it answers with garbage. An error for one request is that request's error.

A modern backend (MCP 2026-07-28, once the backend actor sets `modern`) has no session: every request is a
POST of its own with the headers http_headers.py builds (no Mcp-Session-Id, no GET stream, no DELETE), and a
cancelled request's POST is aborted rather than followed by a notification. The era probe's server/discover
answered 401, 403 or 5xx ends the connection: an error, never a verdict.

What each request carries beside the protocol's headers is the backend's Credentials' (credentials.py): a
client's call its caller's exchanged token and the headers the backend forwards, the gateway's own
requests its own credential. A 401 to a broker's token drops that token and sends the request once more
with a new one; a second 401, or no token at all, is that request's error, naming the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final

import httpx2
import orjson
import trio
from loguru import logger

from actors.backends.credentials import Credentials
from actors.backends.era import DISCOVER
from actors.backends.http_answers import error_for, error_frame, read_all, version_of
from actors.backends.http_headers import ParamHeaders, modern_headers
from actors.backends.sse import StreamOrigins, TooLargeError, is_answer, read_event, sse_events
from actors.backends.token_broker import TokenUnavailableError
from actors.backends.token_cache import Minted
from actors.framing.transport import receive_or_end
from actors.protocol.envelopes import Call
from actors.protocol.eras import is_modern_request
from actors.protocol.errors import unavailable
from actors.protocol.on_behalf import OnBehalf

INBOUND_SIZE: Final = 64  # frames from the server queued before its streams wait for the backend actor
CONNECT_TIMEOUT_S: Final = 10.0
RETRY_S: Final = 1.0  # before a GET stream is opened again, unless the server says otherwise (retry)
RETRY_MAX_S: Final = 30.0
RESUME_ATTEMPTS: Final = 2  # GETs with Last-Event-ID for a response stream that dropped before its answer
HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
Extra = dict[str, str]  # a request's headers beside the protocol's: its credential, forwarded headers


class HttpBackendTransport:
    def __init__(
        self,
        nursery: trio.Nursery,
        client: httpx2.AsyncClient,
        url: str,
        headers: Mapping[str, str],
        max_bytes: int,
        credentials: Credentials | None = None,
    ) -> None:
        self._nursery = nursery
        self._client = client
        self.url = url
        self._headers = {**HEADERS, **headers, **(credentials.static if credentials is not None else {})}
        # each request's own headers, when the backend's credential or forward_headers need them
        self._credentials = credentials if credentials is not None and credentials.per_request else None
        self.name = credentials.backend if credentials is not None else url
        self.call_of: Callable[[object], Call | None] | None = None  # its link's in-flight table, by id
        self._max_bytes = max_bytes
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes](INBOUND_SIZE)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.ended = trio.Event()
        self._end = ""
        self.modern = False  # MCP 2026-07-28: set by the backend actor once the probe said so
        self.param_headers: ParamHeaders = {}  # a modern backend's tools' x-mcp-header declarations
        self._posts: dict[Any, trio.CancelScope] = {}  # a modern backend's requests in flight, by id
        self.origins = StreamOrigins()  # the server's requests that came on a call's response stream

    @classmethod
    async def connect(
        cls,
        nursery: trio.Nursery,
        url: str,
        headers: Mapping[str, str],
        max_bytes: int,
        credentials: Credentials | None = None,
    ) -> HttpBackendTransport:
        """Nothing is sent yet: the backend actor's initialize is the first request."""
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=None)  # a call may take as long as its timeout
        client = httpx2.AsyncClient(timeout=timeout, follow_redirects=False)
        return cls(nursery, client, url, headers, max_bytes, credentials)

    @property
    def label(self) -> str:
        return f"session at {self.url}"

    @property
    def ended_cleanly(self) -> bool:
        return False

    def describe_end(self) -> str:
        return self._end or f"{self.label} ended"

    # --- frames -------------------------------------------------------------------------------------

    async def receive(self) -> bytes | None:
        return await receive_or_end(self._inbound)

    async def send(self, frame: bytes) -> None:
        if self.ended.is_set():
            raise trio.BrokenResourceError(self.describe_end())
        message = orjson.loads(frame)
        method = message.get("method")
        if self.modern and method == "notifications/cancelled":
            params = message.get("params")
            scope = self._posts.pop(params.get("requestId") if isinstance(params, dict) else None, None)
            if scope is not None:
                scope.cancel()  # closing the request's stream is how 2026-07-28 cancels it over HTTP
            return
        on_behalf, own = (
            (None, True) if self._credentials is None else self._credentials.whose(message, self.call_of)
        )
        if method == "initialize":
            await self._post(frame, message, on_behalf, own)  # its session id goes on everything after it
            return
        if method == "notifications/initialized":
            # The GET stream first: what the server sends as soon as it is initialized (a list_changed for
            # tools it adds for this client, say) has a stream to go to instead of being dropped.
            await self._nursery.start(self._listen)
        self._nursery.start_soon(self._post, frame, message, on_behalf, own)

    async def send_many(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            await self.send(frame)

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return False  # each message is a POST of its own, made in a task

    async def drain(self) -> None:
        await trio.sleep_forever()  # the streams run in the connection's nursery

    async def aclose(self) -> None:
        self._lose("closed by the gateway", quiet=True)
        with trio.CancelScope(shield=True):
            await self._client.aclose()

    async def stop(self, *, close_wait_s: float, term_wait_s: float) -> None:
        """End the session at the server (DELETE), then close the connections."""
        if self.session_id is not None and not self.ended.is_set():
            with trio.CancelScope(shield=True), trio.move_on_after(max(close_wait_s, 0.5)):
                try:
                    extra, _ = await self._extra(None, own=True)
                    await self._client.delete(self.url, headers={**self._request_headers(), **extra})
                except (httpx2.HTTPError, TokenUnavailableError) as exc:
                    logger.debug("could not end the session at {}: {}", self.url, exc)
        self._lose("the gateway is stopping this backend", quiet=True)
        with trio.CancelScope(shield=True):
            await self._client.aclose()

    # --- requests -----------------------------------------------------------------------------------

    def _request_headers(self, message: dict[str, Any] | None = None) -> dict[str, str]:
        headers = dict(self._headers)
        if message is not None and is_modern_request(message.get("params")):  # the probe's too
            return {**headers, **modern_headers(message, self.param_headers)}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def _extra(self, on_behalf: OnBehalf | None, own: bool) -> tuple[Extra, Minted | None]:
        """A request's credential and forwarded headers (none without per-request credentials)."""
        if self._credentials is None:
            return {}, None
        return await self._credentials.headers_for(on_behalf, own)

    async def _post(
        self, frame: bytes, message: dict[str, Any], on_behalf: OnBehalf | None = None, own: bool = True
    ) -> None:
        request_id = message.get("id") if "method" in message else None
        with trio.CancelScope() as scope:
            if self.modern and request_id is not None:
                self._posts[request_id] = scope
            try:
                for retry in (False, True):  # once more with a new token, when the backend refused one
                    extra, minted = await self._extra(on_behalf, own)
                    async with self._client.stream(
                        "POST", self.url, content=frame, headers={**self._request_headers(message), **extra}
                    ) as response:
                        if response.status_code == 401 and minted is not None and not retry:
                            assert self._credentials is not None and self._credentials.broker is not None
                            self._credentials.broker.refused(minted)
                            continue
                        await self._answer(response, message, request_id, extra, retried=retry)
                    break
            except TokenUnavailableError as exc:
                await self._refuse(message, request_id, str(exc))
            except httpx2.HTTPError as exc:
                self._lose(f"cannot reach {self.url}: {exc or type(exc).__name__}")
            except TooLargeError as exc:
                self._lose(f"{self.url} sent {exc}")
            finally:
                if self._posts.get(request_id) is scope:
                    del self._posts[request_id]

    async def _refuse(self, message: dict[str, Any], request_id: Any, reason: str) -> None:
        """A request that could not be sent for want of a credential: its error, naming the backend."""
        if request_id is None:
            logger.warning("did not send a {}: {}", message.get("method", "response"), reason)
            return
        await self._push(error_frame(request_id, unavailable(self.name, reason).to_wire()))

    async def _answer(
        self,
        response: httpx2.Response,
        message: dict[str, Any],
        request_id: Any,
        extra: Extra,
        retried: bool = False,
    ) -> None:
        status = response.status_code
        if status == 404 and self.session_id is not None:
            self._lose(f"{self.url} answered 404 to the session id: the server ended the session")
            return
        if message.get("method") == DISCOVER and (status in (401, 403) or status >= 500):
            self._lose(f"{self.url} answered HTTP {status} to {DISCOVER}")
            return
        if status == 202 or request_id is None:
            if status >= 400:
                logger.warning(
                    "{} refused a {}: HTTP {}", self.url, message.get("method", "response"), status
                )
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if status == 401:
            again = " again, after a new token was asked for" if retried else ""
            await self._refuse(message, request_id, f"it refused the gateway's credential (HTTP 401{again})")
            return
        if status >= 400:
            await self._push(await error_for(self.url, response, kind, request_id, self._max_bytes))
            return
        if message.get("method") == "initialize":
            self.session_id = response.headers.get("mcp-session-id")
        if kind == "application/json":
            body = await read_all(response, self._max_bytes)
            if message.get("method") == "initialize":
                self.protocol_version = version_of(body)
            await self._push(body)
        elif kind == "text/event-stream":
            await self._follow(response, request_id, extra)
        else:
            self._lose(f"{self.url} answered a request with {kind or 'no content type'}")

    # --- SSE ----------------------------------------------------------------------------------------

    async def _follow(self, response: httpx2.Response, request_id: Any, extra: Extra) -> None:
        """Pass a response stream's events on until its answer; a stream that drops first is resumed
        with Last-Event-ID (and the request's own credential), or its request gets an error."""
        answered, last_id = await self._relay(response, request_id)
        for _ in range(RESUME_ATTEMPTS):
            if answered or last_id is None:
                break
            headers = {
                **self._request_headers(),
                **extra,
                "accept": "text/event-stream",
                "last-event-id": last_id,
            }
            try:
                async with self._client.stream("GET", self.url, headers=headers) as resumed:
                    if resumed.status_code != 200:
                        break
                    answered, newer = await self._relay(resumed, request_id)
                    last_id = newer or last_id
            except httpx2.HTTPError:
                break
        if not answered:
            error = {"code": -32603, "message": f"{self.url} closed the stream without answering"}
            await self._push(error_frame(request_id, error))

    async def _relay(self, response: httpx2.Response, request_id: Any) -> tuple[bool, str | None]:
        answered, last_id = False, None
        async for event_id, data in sse_events(response, self._max_bytes):
            last_id = event_id or last_id
            if not data:
                continue
            if request_id is not None:
                message = read_event(data)
                answered = is_answer(message, request_id)
                self.origins.note(message, request_id)
            await self._push(data)
            if answered:
                break
        return answered, last_id

    async def _listen(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The standalone GET stream, opened again whenever it ends, while the session lives. Started once
        the first GET is answered (or has failed)."""
        delay = RETRY_S
        while not self.ended.is_set():
            try:
                extra, _ = await self._extra(None, own=True)
                headers = {**self._request_headers(), **extra, "accept": "text/event-stream"}
                async with self._client.stream("GET", self.url, headers=headers) as response:
                    task_status.started()
                    task_status = trio.TASK_STATUS_IGNORED
                    if response.status_code == 405:
                        return  # the server offers no such stream
                    if response.status_code == 404:
                        self._lose(f"{self.url} answered 404 to the session id: the server ended the session")
                        return
                    if response.status_code == 200:
                        delay = RETRY_S
                        await self._relay(response, None)
            except (httpx2.HTTPError, TokenUnavailableError) as exc:
                logger.debug("the GET stream of {} broke: {}", self.url, exc)
            except TooLargeError as exc:
                self._lose(f"{self.url} sent {exc}")
                return
            finally:
                task_status.started()  # a first GET that failed: the session goes on without it for now
                task_status = trio.TASK_STATUS_IGNORED
            await trio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    # --- frames in ----------------------------------------------------------------------------------

    async def _push(self, frame: bytes) -> None:
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):  # over: nobody waits for it
            await self._inbound_send.send(frame)

    def _lose(self, reason: str, *, quiet: bool = False) -> None:
        if not self.ended.is_set():
            self._end = reason
            if not quiet:  # the warning is the supervisor's, which gets the reason from describe_end()
                logger.debug("{}", reason)
            self.ended.set()
        self._inbound_send.close()
