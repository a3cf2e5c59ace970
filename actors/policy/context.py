"""What a rule sees: who asks (a Caller) and what the request names (a Target), as CEL variables.

Variables: `jwt` (the verified token's claims; {} without a token), `scopes` (its `scope`/`scp`, a list),
`principal` ({issuer, subject}), `source` ({address, listener}), and `mcp` ({method, backend, tool: {name,
target}, prompt: {name}, resource: {uri}}; what a request does not name is "").
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Protocol

import attrs
import orjson


class HasIdentity(Protocol):
    """What a frontend knows of its client: actors.identity.principal.Principal fits."""

    issuer: str | None
    subject: str
    scopes: frozenset[str]
    claims: Mapping[str, Any]


@attrs.frozen
class Caller:
    """Who asks: the principal of a verified token (or none), the peer's address and the listener."""

    subject: str | None = None
    issuer: str | None = None
    claims: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    scopes: tuple[str, ...] = ()
    address: str = ""
    listener: str = ""  # "stdio", "websocket" or "http"
    variables: dict[str, Any] = attrs.field(init=False, eq=False, repr=False)
    # Whom limits count against: the principal, else the address (client_key, as sessions are counted).
    key: str = attrs.field(init=False, eq=False)
    # Everything a rule can read of the caller, as one string: what cached decisions are keyed by.
    fingerprint: str = attrs.field(init=False, eq=False, repr=False)
    engine: dict[str, Any] = attrs.field(init=False, eq=False, repr=False, factory=dict)  # see engine_context

    def __attrs_post_init__(self) -> None:
        variables = {
            "jwt": dict(self.claims),
            "scopes": list(self.scopes),
            "principal": {"issuer": self.issuer or "", "subject": self.subject or ""},
            "source": {"address": self.address, "listener": self.listener},
        }
        object.__setattr__(self, "key", client_key(self.issuer, self.subject, self.address))
        try:
            seen = orjson.dumps(variables, option=orjson.OPT_SORT_KEYS, default=str).decode()
        except TypeError:  # an integer past 64 bits, or a lone surrogate: the slow writer, on what rules see
            variables = readable(variables)
            seen = json.dumps(variables, sort_keys=True, default=str)
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "fingerprint", seen)


LOOPBACK_CLIENT: Final = "loopback"  # 127.0.0.0/8, ::1 and their IPv4-mapped forms: one host, one client


def client_key(issuer: str | None, subject: str | None, address: str) -> str:
    """Whom a client is counted as, by every count keyed by a client (sessions per client, [limits],
    requests per second): its token's issuer and subject when it has one, else the address it comes from,
    on any listener, in one spelling (IPv4-mapped as IPv4, IPv6 compressed), every loopback address as one
    client. An address that is no IP (stdio, "?") is a client of its own."""
    if subject is not None:
        return "token:" + orjson.dumps([issuer, subject]).decode()
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address)
    except ValueError:
        return f"address:{address}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return LOOPBACK_CLIENT if ip.is_loopback else f"address:{ip.compressed}"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def readable(value: Any) -> Any:
    """A decoded JSON value with each lone surrogate (JSON can escape one: "\\ud800") written as U+FFFD.
    The CEL engine refuses a variable holding one whole, so every rule it runs would fail (and deny) for a
    token with one in any claim, while the Python reading answered: rules see this value on both."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {readable(key): readable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [readable(item) for item in value]
    return value


STDIO_CALLER: Final = Caller(listener="stdio", address="stdio")


def caller_of(principal: HasIdentity | None, address: str, listener: str) -> Caller:
    """The ONE adapter from what a frontend verified to what rules and limits read. The scopes are the
    principal's, read once by the identity layer (a token's `scope`/`scp`, or [stdio]'s configured ones),
    every one of them (the token's size bounds their number), so a rule and a listener's tool_scopes never
    disagree on what a token grants."""
    if principal is None:
        return Caller(address=address, listener=listener)
    return Caller(
        subject=principal.subject,
        issuer=principal.issuer,
        claims=principal.claims,
        scopes=tuple(sorted(principal.scopes)),
        address=address,
        listener=listener,
    )


@attrs.frozen
class Target:
    """What a request names. Build with the class methods."""

    method: str
    backend: str = ""
    tool: str = ""
    prompt: str = ""
    uri: str = ""

    def variables(self, keys: frozenset[str] | None = None) -> dict[str, Any]:
        """`mcp` as rules see it; with `keys`, only those parts (what no rule reads is left out)."""
        every = {
            "method": self.method,
            "backend": self.backend,
            "tool": {"name": self.tool, "target": self.backend if self.tool else ""},
            "prompt": {"name": self.prompt},
            "resource": {"uri": self.uri},
        }
        return every if keys is None else {key: every[key] for key in keys}


def context_of(caller: Caller, target: Target) -> dict[str, Any]:
    return {**caller.variables, "mcp": target.variables()}


def engine_context(caller: Caller) -> Any:
    """The caller's variables converted for the CEL engine once (converting claims costs far more than
    running a rule); kept on the Caller, so a session pays it once. Each decision sets only `mcp`."""
    context = caller.engine.get("context")
    if context is None:
        import cel  # the `policy` extra; only reached when a [policy] compiled

        context = cel.Context()
        for name, value in caller.variables.items():
            context.add_variable(name, value)
        caller.engine["context"] = context
    return context


SAMPLE: Final = context_of(Caller(), Target(method=""))  # every variable, empty: what `check` tries rules on
