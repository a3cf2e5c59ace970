"""[gateway] block_secrets: a secret the gateway knows, found in a tool's arguments or in its result.

The redactor knows every value the config's secrets resolved to and every token minted at run time
(runtime/redact.py); this middleware asks it about each call's arguments before the call and about its
result after. With "warn" the call goes on and the log says which secret (by name, never its value); with
"block" a call whose arguments hold one is refused before it reaches the backend, and a result that holds
one is withheld from the client. Either way the call's audit row names the rule (`rule` column:
`block_secrets: result holds env:FS_TOKEN`), never the value, and a refusal is `decision` deny.

Arguments and results are searched as the JSON text the client sends or gets (one pass of the redactor's
automaton; the values' JSON-escaped forms are known too). Shapes (a JWT, a bearer token) are not looked for
here: a tool may hand out a token of its own on purpose; only the gateway's own secrets are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson
from loguru import logger

from actors.config.schema import BlockSecrets
from actors.middleware.base import CallOutcome, Middleware, ToolCall
from actors.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from actors.protocol.messages import RpcError
from actors.runtime.redact import Redactor

RULE: Final = "block_secrets"
SETTING: Final = '[gateway] block_secrets = "block"'


class SecretBlocker(Middleware):
    """Looks for the redactor's known values in every call's arguments and result (see the module)."""

    def __init__(self, mode: BlockSecrets, redactor: Redactor) -> None:
        self.mode = mode
        self.redactor = redactor

    async def before_call(self, call: ToolCall) -> RpcError | None:
        label = self.redactor.known_in(_texts(call.arguments))
        if label is None:
            return None
        self._found(call, "arguments", label)
        if self.mode is not BlockSecrets.BLOCK:
            return None
        reason = f"refused: the arguments of {call.tool} hold a secret of the gateway's ({SETTING})"
        return RpcError(INVALID_PARAMS, reason)

    async def after_call(self, call: ToolCall, outcome: CallOutcome) -> CallOutcome:
        if outcome.rejected or outcome.cancelled or outcome.result is None:
            return outcome
        label = self.redactor.known_in(_texts(outcome.result))
        if label is None:
            return outcome
        self._found(call, "result", label)
        if self.mode is not BlockSecrets.BLOCK:
            return outcome
        reason = f"withheld: the result of {call.tool} holds a secret of the gateway's ({SETTING})"
        return CallOutcome(error=RpcError(INTERNAL_ERROR, reason), duration_s=outcome.duration_s)

    def _found(self, call: ToolCall, where: str, label: str) -> None:
        """The log line and the audit row's rule; a refusal is the call's decision too."""
        holds = "holds" if where == "result" else "hold"
        rule = f"{RULE}: {where} {holds} {label}"
        call.rule = f"{call.rule}; {rule}" if call.rule else rule
        blocked = self.mode is BlockSecrets.BLOCK
        if blocked:
            call.decision = "deny"
        what = "refused" if blocked and where == "arguments" else "withheld" if blocked else "let through"
        logger.warning(
            "tool {} of backend {}: its {} {} the secret {}; {} (block_secrets = {})",
            call.tool,
            call.backend,
            where,
            holds,
            label,
            what,
            self.mode.value,
        )


def _texts(value: Any) -> Iterator[str]:
    """`value` as the JSON text it travels as; its strings one by one if it cannot be written as JSON."""
    try:
        yield orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        yield from _strings(value)


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple):
            stack += item
