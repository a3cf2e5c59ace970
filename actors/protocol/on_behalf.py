"""What a client's call carries on its caller's behalf to the backend side of the gateway, and no further:
the caller's verified bearer token (the subject token of an RFC 8693 exchange) and the client's headers a
backend's `forward_headers` may name. The backend itself never gets the token: the gateway builds every
request to a backend from scratch (backends/credentials.py), and a backend sees a token exchanged for it.

Neither prints what it holds: a CallerToken's repr names its issuer and subject, never the token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs

MAX_FORWARDED_VALUE_BYTES: Final = 4096  # a trace or tenant header is short; a longer value is not passed on
FORWARDABLE_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")  # what any HTTP client writes again as it came


@attrs.frozen(repr=False, eq=False)
class CallerToken:
    """A caller's verified bearer token: its issuer and subject (as the principal), its `exp` (Unix time,
    None when it names none) and the token itself, revealed only to the token broker's exchange."""

    issuer: str | None
    subject: str
    expires_at: float | None
    _token: str = attrs.field(alias="token")

    def reveal(self) -> str:
        """The token, for the one place it is handed on: the token endpoint of an exchange."""
        return self._token

    def __repr__(self) -> str:
        return f"CallerToken({self.issuer!r}, {self.subject!r})"


@attrs.frozen(slots=True, eq=False)
class OnBehalf:
    """What the calls of one client request carry for their backends: the caller's token (None: the client
    sent none, or its frontend checks none) and the client's headers that some backend forwards, by
    lower-case name."""

    token: CallerToken | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)


def on_behalf(
    token: CallerToken | None, headers: Mapping[str, str], forwardable: frozenset[str]
) -> OnBehalf | None:
    """A request's OnBehalf: its token, and of its headers (`headers`, lower-case names) those named in
    `forwardable` (every backend's forward_headers) whose value is ASCII text of at most
    MAX_FORWARDED_VALUE_BYTES (another is not passed on). None when there is nothing to carry."""
    kept = {}
    if forwardable:
        kept = {
            name: value
            for name in forwardable
            if (value := headers.get(name)) is not None
            and len(value) <= MAX_FORWARDED_VALUE_BYTES
            and FORWARDABLE_VALUE.fullmatch(value)
        }
    if token is None and not kept:
        return None
    return OnBehalf(token, kept)
