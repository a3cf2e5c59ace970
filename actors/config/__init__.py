"""The TOML config: read with tomllib, structured by cattrs into frozen attrs classes, checked whole.

A bad file fails before anything starts, naming every problem as `FILE: key: reason`.

    schema.py            [gateway], [audit], [[middleware]] and Config, the whole file as loaded
    backend_schema.py    [[backends]]: StdioBackend (command) or RemoteBackend (url), restart, health
    listener_schema.py   [websocket] and [http] (the keys they share once), [NAME.auth]
    tool_policy.py       [backends.tools]: which tools are shown, under which names
    checks.py            the rules values must pass, as attrs validators
    converter.py         strict TOML scalars; each table structured key by key, every problem kept
    load.py              load_config: read, structure, resolve, report
    commands.py          the program a stdio backend runs, looked up as check and a start both do
    resolve.py           what the file names outside itself: paths, environment variables, key files,
                         middleware modules, a backend's program
    secret.py            secrets by reference ({ env }, { file }, { value }): read once, shown by name
    files.py             reading a file the config names: a regular file only, up to a cap
    advice.py            what `check` warns of in a config it accepts
    errors.py            ConfigError and ConfigProblem
"""

from actors.config.backend_schema import BackendConfig as BackendConfig
from actors.config.backend_schema import BackendEra as BackendEra
from actors.config.backend_schema import BackendKind as BackendKind
from actors.config.backend_schema import HealthConfig as HealthConfig
from actors.config.backend_schema import RemoteBackend as RemoteBackend
from actors.config.backend_schema import RestartConfig as RestartConfig
from actors.config.backend_schema import RestartPolicyName as RestartPolicyName
from actors.config.backend_schema import RootsMode as RootsMode
from actors.config.backend_schema import StdioBackend as StdioBackend
from actors.config.errors import ConfigError as ConfigError
from actors.config.errors import ConfigProblem as ConfigProblem
from actors.config.listener_schema import AuthTable as AuthTable
from actors.config.listener_schema import HttpSettings as HttpSettings
from actors.config.listener_schema import JwtAuth as JwtAuth
from actors.config.listener_schema import ListenerSettings as ListenerSettings
from actors.config.listener_schema import WebSocketSettings as WebSocketSettings
from actors.config.load import load_config as load_config
from actors.config.resolve import resolve_command as resolve_command
from actors.config.schema import AuditSettings as AuditSettings
from actors.config.schema import Config as Config
from actors.config.schema import GatewaySettings as GatewaySettings
from actors.config.schema import MiddlewareSpec as MiddlewareSpec
from actors.config.schema import ToolNaming as ToolNaming
from actors.config.tool_policy import ToolPolicy as ToolPolicy
