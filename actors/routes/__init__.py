"""[[routes]]: one gateway serving chosen subsets of its catalog at different endpoints, each a view of the
catalog (include/exclude patterns, per-tool renames and overrides, fixed arguments), compiled from the
catalog snapshot and the route alone."""

from actors.config.route_schema import RouteConfig, ToolOverride, route_problems
from actors.routes.table import Routes, RouteState
from actors.routes.view import fixed_arguments, route_view

__all__ = [
    "RouteConfig",
    "RouteState",
    "Routes",
    "ToolOverride",
    "fixed_arguments",
    "route_problems",
    "route_view",
]
