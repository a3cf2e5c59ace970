"""[admin]: the admin listener (health, readiness, metrics, status), and its bearer token.

Without an [admin] table the gateway has no admin listener. On a loopback host the token is optional; on any
other host `token_env` is required, so the tree, the backends' errors and the metrics are never served to
the network unauthenticated. The token itself is read from that variable by resolve.py, never from the file.
"""

from __future__ import annotations

from typing import Final

import attrs
from attrs.validators import optional

from actors.config.checks import environment_name
from actors.config.listener_schema import LOOPBACK_HOSTS, listener_port

NEEDS_TOKEN: Final = (
    "required when host is not loopback (127.0.0.1, localhost, ::1): "
    "name the environment variable that holds the admin bearer token"
)


@attrs.frozen(kw_only=True)
class AdminTable:
    """[admin] as written: where the token comes from, never the token itself."""

    host: str = "127.0.0.1"
    port: int = listener_port(8767)
    token_env: str | None = attrs.field(default=None, validator=optional(environment_name))

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS


@attrs.frozen(kw_only=True)
class AdminSettings(AdminTable):
    """[admin] loaded: `token` read from `token_env` (never logged, never repr'd)."""

    token: str | None = attrs.field(default=None, repr=False)
