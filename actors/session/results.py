"""What a tools/call's result may bring to this session's client, and how its tools list names apps.

Each call gets its shape (`ResultShaper.for_call`), carried on the Call and applied once, where the
backend's answer arrives (protocol/envelopes.py `answer`), before anything holds the answer: a bridged
call parked for a retry, a legacy client's rounds, a task waiting with middleware. So the limit holds in
both eras and through the bridges, and a huge result is cut while it is held once, not copied on. The
shape: the output limit (output/limits.py; the tool's, else the route's, else the gateway's), then every
URI the result names in its public form with the apps this caller may not read removed
(output/app_uris.py). Nothing here raises on a backend's values: it runs in the backend's task."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
from loguru import logger

from actors.catalog import Route
from actors.catalog.resource_routes import public_uri
from actors.catalog.view import CatalogView
from actors.output.app_uris import Readable, result_with_public_uris, tool_with_public_app
from actors.output.limits import advertised, limited_result
from actors.output.settings import OutputGate
from actors.policy import Caller, PolicyGate, Target
from actors.protocol.codec import clip
from actors.protocol.messages import Tool
from actors.runtime.watch import Watch

Shape = Callable[[dict[str, Any], int | None], dict[str, Any]]  # (result, its raw size) -> shaped

if TYPE_CHECKING:
    from actors.routes import RouteState


@attrs.define(eq=False)
class ResultShaper:
    """Owns: one session's last shaped tools list (by the identity of the list it was made from).
    Receives: each tools/call forwarded (`for_call`), each tools list sent (`listed`).
    Errors: none of its own; a backend's malformed values pass through as they are."""

    output: OutputGate
    catalog: Watch[CatalogView]
    policy: PolicyGate | None = None  # the gateway's [policy]: which apps this caller may read
    caller: Callable[[], Caller] | None = None  # who the session's caller is now
    route: RouteState | None = None  # the session's route: its max_output_chars in force (a reload's)
    _listed: tuple[object, ...] | None = None  # (list, its versions..., the shaped list)

    @property
    def route_limit(self) -> int | None:
        route = self.route
        return route.config.max_output_chars if route is not None else None

    def for_call(self, backend: str, own: str, public: str) -> Shape | None:
        """The shape of the result of `backend`'s tool `own`, called as `public`; None when it could change
        nothing (no limit, no [policy], and no resources whose URIs a result could name otherwise): the
        forwarding path then does nothing more than before."""
        limits, policy = self.output.limits, self.policy
        if not limits.tools and limits.gateway is None and self.route_limit is None:  # no limit at all
            if (policy is None or policy.policy is None) and _every_uri_bare(self.catalog.value):
                return None  # the common case, decided in a few attribute reads: nothing more per call
            limit = None
        else:
            limit = limits.limit(backend, own, self.route_limit)
        if limit is None and _every_uri_bare(self.catalog.value) and self._may_read() is None:
            return None
        return partial(self._shape, backend, public, limit)

    def _shape(
        self, backend: str, public: str, limit: int | None, result: dict[str, Any], raw_size: int | None
    ) -> dict[str, Any]:
        if limit is not None and (raw_size is None or raw_size > limit):  # within it: nothing to measure
            limited = limited_result(result, limit, public)
            if limited is not result:
                what = "withheld (structuredContent)" if limited.get("isError") is True else "text cut"
                logger.info(
                    "result of tool {!r} of backend {}: {} at max_output_chars {}",
                    clip(public),
                    backend,
                    what,
                    limit,
                )
            result = limited
        view = self.catalog.value
        return result_with_public_uris(result, partial(_public_of, view, backend), self._readable(backend))

    def listed(self, tools: tuple[Tool, ...], routes: dict[str, Route]) -> tuple[Tool, ...]:
        """The tools as this session lists them: each tool's limit told where it is above a client's default
        (output/limits.py `advertised`), and apps this caller may not read no longer pointed at."""
        may_read = self._may_read()
        limits = self.output.limits
        advertise = limits.may_advertise(self.route_limit)
        if may_read is None and not advertise:
            return tools
        key = (tools, self.output.generation, self.policy.generation if self.policy else 0, self._caller())
        last = self._listed
        if last is not None and last[0] is tools and last[1:-1] == key[1:]:
            return last[-1]  # type: ignore[return-value]
        shown: list[Tool] = []
        for tool in tools:
            route = routes.get(tool.get("name"))  # type: ignore[arg-type]
            if route is None:
                shown.append(tool)
                continue
            if advertise:
                tool = advertised(tool, limits.limit(route.backend, route.own, self.route_limit))
            if may_read is not None and isinstance(tool.get("_meta"), dict):
                tool = tool_with_public_app(tool, str, partial(may_read, route.backend))
            shown.append(tool)
        result = tuple(shown)
        self._listed = (*key, result)
        return result

    def _caller(self) -> Caller | None:
        return self.caller() if self.caller is not None else None

    def _may_read(self) -> Callable[[str, str], bool] | None:
        """(backend, public URI) -> whether the caller may read it; None without a [policy]."""
        gate, caller = self.policy, self._caller()
        if gate is None or gate.policy is None or caller is None:
            return None

        def may_read(backend: str, uri: str) -> bool:
            return gate.decide(caller, Target("resources/read", backend, uri=uri)).allowed

        return may_read

    def _readable(self, backend: str) -> Readable | None:
        may_read = self._may_read()
        return partial(may_read, backend) if may_read is not None else None


def _every_uri_bare(view: CatalogView) -> bool:
    """Every backend URI's public form is itself: no rule prefixing them, and no resource nor template
    listed that another backend's URI could collide with."""
    return not view.always_prefix and not view.resources and not view.template_routes


def _public_of(view: CatalogView, backend: str, own: str) -> str:
    return public_uri(view, Route(backend, own))
