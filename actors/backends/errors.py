"""Why a backend's run ended: the errors a run raises to its supervisor.

They are ChildExitErrors (runtime/supervisor.py): each explains itself in one line and is logged without a
traceback, and carries the process's last stderr lines apart from the reason, for the catalog's status.
They are not wire errors: a client sees at most their reason, in the error its call is answered with.
"""

from __future__ import annotations

from actors.protocol.errors import GatewayError
from actors.protocol.messages import RpcError
from actors.runtime.redact import REDACTOR
from actors.runtime.supervisor import ChildExitError


class BackendError(GatewayError, ChildExitError):
    """A backend failed in a way that ends its current run (the supervisor decides what follows).

    `str()` is for the log and carries the process's last stderr lines when there are any; `without_stderr`
    is the reason a client may be told (stderr goes to clients only with [gateway] expose_backend_stderr)."""


class BackendExitedError(BackendError):
    """The backend's process ended or its stream closed."""


class BackendStartError(BackendError):
    """The backend could not be started or did not finish its handshake."""


class BackendRefusedError(BackendStartError):
    """A start a restart cannot mend (its files drifted from their pins): the supervisor leaves it down
    (`final`) until a reload or a new gateway, and the catalog shows it in `state` (catalog/status.py)."""

    final = True

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class BackendRejectedError(BackendStartError):
    """The server refused the connection with an HTTP status (401: a credential it does not take)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class BackendHungError(BackendError):
    """The backend stopped answering health pings: alive, perhaps, but of no use."""


class BackendLaneError(BackendError):
    """The backend's legacy lane (its second process or connection, for legacy clients) died or hung once
    open: the run ends, as it would for the death of its only process, and the supervisor restarts both."""


def redacted(error: RpcError) -> RpcError:
    """A backend's error as the gateway passes it on (to a client, a log, a span): its message and data
    redacted (runtime/redact.py); the same object when there was nothing to take out."""
    message, data = REDACTOR.redact(error.message), REDACTOR.redact_json(error.data)
    return error if message is error.message and data is error.data else RpcError(error.code, message, data)
