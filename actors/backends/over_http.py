"""Whether a backend's transport is the Streamable HTTP one, asked without loading that module (and httpx2
with it) into a gateway that reaches no backend over HTTP: no such transport exists before it is loaded."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from actors.backends.http import HttpBackendTransport
    from actors.framing.transport import BackendTransport


def is_http(transport: BackendTransport) -> TypeGuard[HttpBackendTransport]:
    module = sys.modules.get("actors.backends.http")
    return module is not None and isinstance(transport, module.HttpBackendTransport)
