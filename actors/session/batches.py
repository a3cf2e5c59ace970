"""JSON-RPC batches, which only protocol 2025-03-26 has: a batch received from the client, its requests served
each as if alone, and their answers sent back together as one array."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Final

import trio
from loguru import logger

from actors.protocol.codec import is_id, shown
from actors.protocol.eras import is_modern_request
from actors.protocol.errors import INVALID_REQUEST, rpc_error
from actors.protocol.messages import Batch, ErrorResponse, Message, Notification, Request, Response, RpcError
from actors.session.budget import request_bytes
from actors.session.fields import bad_id, duplicate, too_many
from actors.session.inflight import InFlight
from actors.session.notifications import receive_notification

if TYPE_CHECKING:
    from actors.session.dispatcher import Dispatcher

BATCH_VERSIONS: Final = frozenset({"2025-03-26"})  # the one negotiated version with JSON-RPC batches


async def receive_batch(d: Dispatcher, batch: Batch, requests: trio.Nursery) -> None:
    """Protocol 2025-03-26 allows JSON-RPC batches: each request is served as if alone (concurrently),
    and the responses go back as one array. Every later version refuses them. Each request of a batch
    counts against max_inflight; those past it are answered with the error in the batch's array."""
    if d.version not in BATCH_VERSIONS:
        reason = f"protocol {d.version} has no batches" if d.version else "a batch before initialize"
        await d.send(ErrorResponse(None, rpc_error(INVALID_REQUEST, f"Invalid request: {reason}")))
        return
    d._batches += 1
    answers: list[Message] = []
    accepted: list[tuple[Request, InFlight]] = []
    for item in batch.items:
        match item:
            case Response() | ErrorResponse() if d.client_asks.settle(item):
                pass  # the client's answer to a request of ours
            case ErrorResponse():
                answers.append(item)  # what an element that is no message earns
            case Notification():
                receive_notification(d, item)
            case Request(id=request_id) if not is_id(request_id):
                answers.append(ErrorResponse(None, bad_id(request_id)))
            case Request(id=request_id, params=params) if is_modern_request(params):
                error = rpc_error(INVALID_REQUEST, "Invalid request: a 2026-07-28 request is never batched")
                answers.append(ErrorResponse(request_id, error))
            case Request(id=request_id, method="initialize"):
                error = rpc_error(INVALID_REQUEST, "Invalid request: initialize cannot be part of a batch")
                answers.append(ErrorResponse(request_id, error))
            case Request(id=request_id) if request_id in d.inflight:
                answers.append(ErrorResponse(request_id, duplicate(request_id)))
            case Request(id=request_id) if len(d.inflight) >= d.settings.max_inflight:
                answers.append(ErrorResponse(request_id, too_many(d.settings.max_inflight)))
            case Request(id=request_id) if (over := _over_budget(d, item)) is not None:
                answers.append(ErrorResponse(request_id, over))
            case Request(id=request_id):
                accepted.append((item, d.inflight.accept(request_id, d._batches, request_bytes(item))))
                d.trace(accepted[-1][1], item)
            case _:
                logger.opt(lazy=True).debug(
                    "ignored a response from the client in a batch: {}", partial(shown, item)
                )
    if accepted:
        requests.start_soon(_serve_batch, d, accepted, answers)
    elif answers:
        await d.send(Batch(tuple(answers)))  # type: ignore[arg-type]


async def _serve_batch(
    d: Dispatcher, accepted: list[tuple[Request, InFlight]], answers: list[Message]
) -> None:
    async def collect(message: Message) -> None:
        answers.append(message)

    async with trio.open_nursery() as nursery:
        for request, entry in accepted:
            entry.scope = trio.CancelScope()
            nursery.start_soon(d._serve, request, entry, collect)
    if answers:
        await d.send(Batch(tuple(answers)))  # type: ignore[arg-type]
    for _, entry in accepted:
        d.inflight.remove(entry)


def _over_budget(d: Dispatcher, request: Request) -> RpcError | None:
    """Why a request of a batch is past its own or its client's byte budget (session/budget.py)."""
    return d.settings.budget.refusal(d.inflight.client, request_bytes(request))
