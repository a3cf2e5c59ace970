"""Why the fleet's Redis link failed, as /status and the log say it: the error and its first cause that says
something, and over TLS, for a link the server reset, the likely why (a client certificate not accepted)."""

from __future__ import annotations

import ssl
from pathlib import Path

from actors.config.fleet_schema import RedisTls
from actors.fleet.redis_client import MAX_REASON_CHARS, link_failure


def _wrapped(cause: BaseException) -> Exception:
    """As coredis raises it: its own error, from an empty anyio one, from the socket's."""
    try:
        try:
            raise RuntimeError() from cause
        except RuntimeError as empty:
            raise ConnectionError("Connection lost while sending request") from empty
    except ConnectionError as exc:
        return exc


def test_a_link_reset_over_tls_names_the_cause_and_the_missing_client_certificate() -> None:
    tls = RedisTls(context=ssl.create_default_context())
    reason = link_failure(_wrapped(ConnectionResetError(104, "Connection reset by peer")), tls)
    assert reason.startswith("ConnectionError: Connection lost while sending request (ConnectionResetError: ")
    assert "certificate it does not accept (none given: redis_cert_file, redis_key_file)" in reason
    given = RedisTls(cert_file=Path("c.pem"), key_file=Path("c.key"), context=ssl.create_default_context())
    assert "(none given" not in link_failure(_wrapped(ConnectionResetError(104, "reset")), given)


def test_a_plain_link_failure_gets_no_tls_hint_and_the_reason_is_capped() -> None:
    reason = link_failure(_wrapped(ConnectionResetError(104, "Connection reset by peer")), None)
    assert "(ConnectionResetError: " in reason and "certificate" not in reason
    assert link_failure(TimeoutError(), None) == "TimeoutError"
    assert len(link_failure(OSError("x" * 5000), None)) == MAX_REASON_CHARS
