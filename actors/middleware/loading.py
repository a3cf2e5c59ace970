"""Making the configured middleware: the built-in audit first (so it sees every call as it ended, refusals
by later middleware included), then [gateway] block_secrets when it is on (so it sees what the client is
sent, after every [[middleware]]'s after_call), then each [[middleware]] table in order."""

from __future__ import annotations

from actors.config.errors import ConfigError, ConfigProblem
from actors.config.schema import BlockSecrets, Config
from actors.middleware.audit import AuditMiddleware
from actors.middleware.base import Middleware
from actors.middleware.block_secrets import SecretBlocker
from actors.runtime.redact import REDACTOR


def build_middleware(config: Config) -> tuple[Middleware, ...]:
    """Call each factory with its options; ConfigError naming the table when one fails or returns
    something that is not a Middleware."""
    made: list[Middleware] = [AuditMiddleware(config.audit)] if config.audit is not None else []
    if config.gateway.block_secrets is not BlockSecrets.OFF:
        made.append(SecretBlocker(config.gateway.block_secrets, REDACTOR))
    problems = []
    for index, spec in enumerate(config.middleware):
        key = f"middleware[{index}].use"
        try:
            middleware = spec.factory(**spec.options)
        except Exception as exc:  # the operator's code: whatever it raises is a problem with this table
            problems.append(
                ConfigProblem(str(config.path), key, f"{spec.use} failed: {type(exc).__name__}: {exc}")
            )
            continue
        if not isinstance(middleware, Middleware):
            reason = f"{spec.use} made a {type(middleware).__name__}, not an actors.middleware.Middleware"
            problems.append(ConfigProblem(str(config.path), key, reason))
            continue
        made.append(middleware)
    if problems:
        raise ConfigError(problems)
    return tuple(made)
