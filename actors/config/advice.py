"""What `mcp-gateway check` warns of in a config it accepts: settings that work but that an operator most
likely did not mean, each as `FILE: key: warning: reason`. A warning never fails the check (exit 0)."""

from __future__ import annotations

from actors.config.errors import ConfigProblem
from actors.config.listener_schema import LOOPBACK_HOSTS
from actors.config.schema import Config
from actors.trust import TrustMode


def advice(config: Config) -> list[ConfigProblem]:
    """The warnings for `config`, in file order."""
    found = []
    for table, listener in (("websocket", config.websocket), ("http", config.http)):
        if listener is not None and listener.host not in LOOPBACK_HOSTS and not listener.checks_tokens:
            reason = (
                f"warning: {listener.host} is reachable from other machines and [{table}.auth] is absent,"
                " so anyone who can reach the port may call every tool: add [{table}.auth] (see"
                " config/auth.toml) or listen on 127.0.0.1"
            ).replace("{table}", table)
            found.append(ConfigProblem(str(config.path), f"{table}.host", reason))
    trusting = [name for name, mode in config.trust_modes().items() if mode is not TrustMode.OFF]
    if trusting and (config.admin is None or config.admin.token is None):
        reason = (
            f"warning: [trust] holds changed definitions of {', '.join(trusting)}, but without [admin]"
            " token_env nobody can review them (`mcp-gateway trust` needs the admin listener's token)"
        )
        found.append(ConfigProblem(str(config.path), "admin.token_env", reason))
    return found
