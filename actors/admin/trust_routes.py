"""The admin listener's trust routes: the operator's review of held definitions (`mcp-gateway trust`).

    GET  /trust                  every backend's mode, every held definition, the newest events
    GET  /trust/diff?name=B/N    one held definition: what changed (a unified diff), the scan's findings
         [&kind=tool|prompt|template]
    POST /trust/approve          {"name": "B/N", "kind"?: ..., "digest"?: ..., "by"?: ...}: it becomes the
                                 approved form, and clients see it
    POST /trust/reject           the same body: it stays hidden, marked rejected

NAME is BACKEND/OWN: the backend's config name and the definition's own name as its backend lists it (for
a resource template, its uriTemplate), never a public name: a held definition's public name can change with
the naming rule, its own name cannot, and a backend's name has no '/', so the first '/' splits it. When one
name is held as two kinds, `kind` must say which. `digest` (a prefix of at least 8 hex digits) makes a
decision apply only to the form the operator reviewed. Every route needs the admin token (an admin listener
without one answers 403): the decisions change what every client sees.
"""

from __future__ import annotations

import time
from typing import Any, Final
from urllib.parse import parse_qs

import attrs
import orjson

from actors.catalog import CatalogView
from actors.catalog.trust_keeper import TrustKeeper
from actors.runtime.log import escape_controls
from actors.runtime.watch import Watch
from actors.trust import Held
from actors.trust.definitions import KINDS
from actors.trust.diff import unified
from actors.trust.records import MAX_BY_CHARS, MAX_NAME_CHARS

MAX_BODY_BYTES: Final = 16 * 1024  # a decision's JSON body
MIN_DIGEST_CHARS: Final = 8
EVENTS_SHOWN: Final = 50
Answer = tuple[int, dict[str, Any]]


@attrs.define(kw_only=True)
class TrustRoutes:
    """Owns: nothing; reads the catalog's view (what is held now) and asks the keeper (decisions, texts).
    Receives: the admin app's trust requests.
    Sends: decisions to the trust keeper.
    Stops when: never itself.
    Errors: each bad request gets its status and {"error": why}."""

    catalog: Watch[CatalogView]
    keeper: TrustKeeper | None

    async def listing(self) -> Answer:
        view = self.catalog.value
        events = await self.keeper.events(EVENTS_SHOWN) if self.keeper is not None else []
        return 200, {
            "modes": {name: mode.value for name, mode in view.trust.modes.items()},
            "held": [held_json(view, held) for held in view.trust.held],
            "events": [event.as_json() for event in events],
        }

    async def diff(self, query: bytes) -> Answer:
        fields = parse_qs(query.decode("latin-1"), max_num_fields=8)
        found = find(
            self.catalog.value, _first(fields, "name"), _first(fields, "kind"), _first(fields, "digest")
        )
        if isinstance(found, tuple):
            return found
        approved = await self.keeper.text_of(found.key) if self.keeper is not None else None
        body = held_json(self.catalog.value, found)
        body["diff"] = unified(approved, found.text, found.key.shown)
        return 200, body

    async def decide(self, body: bytes, approve: bool, address: str) -> Answer:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, {"error": "the body must be a JSON object"}
        if not isinstance(request, dict):
            return 400, {"error": "the body must be a JSON object"}
        by = request.get("by", "admin")
        if not isinstance(by, str) or not by.strip():
            return 400, {"error": '"by" must be a non-empty string (who decides)'}
        found = find(self.catalog.value, request.get("name"), request.get("kind"), request.get("digest"))
        if isinstance(found, tuple):
            return found
        if self.keeper is None:
            return 503, {"error": "this gateway keeps no trust store"}
        who = escape_controls(by.strip())[:MAX_BY_CHARS]
        refused = await self.keeper.decide(found.key, found, approve, f"{who} ({address})"[:MAX_BY_CHARS])
        if refused is not None:
            return 409, {"error": f"{found.key.shown}: {refused}"}
        word = "approved" if approve else "rejected"
        return 200, {word: found.key.as_json(), "digest": found.digest, "at": time.time()}


def find(view: CatalogView, name: object, kind: object, digest: object) -> Held | Answer:
    """The held record NAME (and `kind`, `digest`) names, or the answer saying why there is none."""
    if not isinstance(name, str) or "/" not in name or len(name) > MAX_NAME_CHARS:
        return 400, {"error": '"name" must be BACKEND/NAME, as `mcp-gateway trust list` shows it'}
    if kind is not None and kind not in KINDS:
        return 400, {"error": f'"kind" must be one of {", ".join(KINDS)}'}
    if digest is not None and not _hex_prefix(digest):
        return 400, {"error": f'"digest" must be at least {MIN_DIGEST_CHARS} hex digits of the held digest'}
    backend, _, own = name.partition("/")
    matches = [
        held
        for held in view.trust.held
        if held.key.backend == backend and held.key.name == own and kind in (None, held.key.kind)
    ]
    shown = escape_controls(name)
    if not matches:
        return 404, {"error": f"nothing is held under {shown} (see `mcp-gateway trust list`)"}
    if len(matches) > 1:
        kinds = " and ".join(held.key.kind for held in matches)
        return 409, {"error": f'{shown} is held as a {kinds}: say which with --kind ("kind")'}
    (held,) = matches
    if isinstance(digest, str) and not held.digest.startswith(digest.lower()):
        why = f"{shown} changed since it was reviewed: it is held now as {held.digest}; review it again"
        return 409, {"error": why}
    return held


def held_json(view: CatalogView, held: Held) -> dict[str, Any]:
    """A held record as the operator's tools show it (its text only in a diff)."""
    public = view.trust.hidden.get(held.key)
    return {
        **held.key.as_json(),
        "public": public,
        "hidden": public is not None,  # the backend lists this form now (else it lists another one)
        "reason": held.reason.value,
        "why": held.why,
        "digest": held.digest,
        "approved": held.approved,
        "renamed_from": held.renamed_from,
        "findings": [finding.as_json() for finding in held.findings],
        "first_seen": held.first_seen,
        "last_seen": held.last_seen,
        "changes": held.changes,
        "rejected_by": held.rejected_by,
    }


def _first(fields: dict[str, list[str]], name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values else None


def _hex_prefix(value: object) -> bool:
    return (
        isinstance(value, str)
        and MIN_DIGEST_CHARS <= len(value) <= 64
        and all(char in "0123456789abcdef" for char in value.lower())
    )
