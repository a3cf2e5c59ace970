"""The cattrs converter that turns TOML values into the schema's classes.

Scalars are strict: TOML already has types, so nothing is coerced (true is not 1, "5" is not 5, nan is not a
duration). A table (any attrs class) is structured key by key, so that one call reports every problem in it:
unknown keys, missing keys, values of the wrong type, and values that break their field's rule. Errors are
cattrs' own exception groups, each inner error noted with its key; load.py turns them into `key: reason`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Final

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
)

from actors.config.auth_schema import AUTH_KINDS, AuthKind, BackendAuth
from actors.config.backend_schema import HealthConfig, RestartConfig, RootsMode
from actors.config.checks import WHEN_MISSING, environment_name
from actors.config.listener_schema import AuthTable
from actors.config.secret import FORMS, Secret, SecretSource, structure_secret
from actors.config.tool_policy import HINTS, ToolPolicy

# What structuring a value raises when the value is wrong; anything else is a bug and propagates.
STRUCTURE_ERRORS: Final = (TypeError, ValueError, BaseValidationError)
# Tables that sit inside another: named when the value is not a table at all.
NESTED_TABLES: Final[Mapping[type, str]] = {
    RestartConfig: "backends.restart",
    HealthConfig: "backends.health",
    ToolPolicy: "backends.tools",
    AuthTable: "websocket.auth or http.auth",
    **{kind: "backends.auth" for kind in AUTH_KINDS.values()},
}
TOML_KINDS: Final[Mapping[type, str]] = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "a table",
}


def kind_of(value: Any) -> str:
    """A TOML value's type, as the operator knows it."""
    return TOML_KINDS.get(type(value), type(value).__name__)


def make_converter() -> cattrs.Converter:
    converter = cattrs.Converter()
    converter.register_structure_hook(str, _string)
    converter.register_structure_hook(int, _integer)
    converter.register_structure_hook(float, _number)
    converter.register_structure_hook(bool, _boolean)
    converter.register_structure_hook(Path, lambda value, _: Path(_string(value, str)))
    for kind, hook in (
        (float | None, _optional_number),
        (tuple[str, ...], _strings),
        (tuple[str, ...] | None, lambda value, _: None if value is None else _strings(value, tuple)),
        (Mapping[str, str], _string_table),
        (Mapping[str, str | Secret], _string_or_secret_table),
        (Mapping[str, Any], _options),
        (RootsMode | tuple[str, ...] | None, _roots),
        (Mapping[str, Mapping[str, bool]], _hint_overrides),
        (Mapping[str, int], _integer_table),
        (BackendAuth | None, lambda value, _: _backend_auth(converter, value)),
    ):
        converter.register_structure_hook_func(lambda t, kind=kind: t == kind, hook)
    converter.register_structure_hook(Secret, lambda value, _: structure_secret(value))
    converter.register_structure_hook(enum.StrEnum, _choice)  # a StrEnum is a str too: this hook is nearer
    converter.register_structure_hook_factory(attrs.has, lambda cls: _table_hook(converter, cls))
    return converter


def _table_hook(converter: cattrs.Converter, cls: type) -> Callable[[Any, type], Any]:
    """Structure a table into `cls`: each key by its field's type, then by its field's validator."""
    fields = attrs.fields_dict(attrs.resolve_types(cls))
    defaults = {
        name: field.default.factory() if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[arg-type]
        for name, field in fields.items()
        if field.default is not attrs.NOTHING
    }
    shown = f" ([{NESTED_TABLES[cls]}])" if cls in NESTED_TABLES else ""

    def structure(raw: Any, _: type) -> Any:
        if not isinstance(raw, dict):
            raise TypeError(f"expected a table{shown}, got {kind_of(raw)}")
        errors: list[Exception] = []
        values: dict[str, Any] = {}
        for name, field in fields.items():
            try:
                if name in raw:
                    values[name] = converter.structure(raw[name], field.type)
                elif field.default is attrs.NOTHING:
                    raise ValueError(field.metadata.get(WHEN_MISSING, "required key is missing"))
            except STRUCTURE_ERRORS as exc:
                errors.append(_noted(exc, cls, name))
        if unknown := raw.keys() - fields.keys():
            errors.append(ForbiddenExtraKeysError("", cls, set(unknown)))
        siblings = SimpleNamespace(**{**defaults, **values})  # what a rule comparing two keys sees
        for name, value in values.items():
            validator = fields[name].validator
            try:
                if validator is not None:
                    validator(siblings, fields[name], value)
            except STRUCTURE_ERRORS as exc:
                errors.append(_noted(exc, cls, name))
        if errors:
            raise ClassValidationError(f"While structuring {cls.__name__}", errors, cls)
        with attrs.validators.disabled():  # the rules ran above, on the keys the file sets
            return cls(**values)

    return structure


def _backend_auth(converter: cattrs.Converter, value: Any) -> BackendAuth | None:
    """[backends.auth]: the table of the kind its `kind` names, with that kind's keys only."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"expected a table ([backends.auth]), got {kind_of(value)}")
    kinds = ", ".join(repr(kind.value) for kind in AuthKind)
    kind = value.get("kind")
    if kind not in AUTH_KINDS:
        reason = "required key is missing" if kind is None else f"{kind!r} is not one of {kinds}"
        error = ValueError(reason) if isinstance(kind, str | None) else TypeError(f"expected one of {kinds}")
        raise ClassValidationError("While structuring auth", [_noted(error, dict, "kind")], dict)
    return converter.structure(value, AUTH_KINDS[kind])  # type: ignore[no-any-return]


def _noted(exc: Exception, cls: type, name: str) -> Exception:
    exc.add_note(
        AttributeValidationNote(f"Structuring class {cls.__qualname__} @ attribute {name}", name, cls)
    )
    return exc


def _choice(value: Any, kind: type[enum.StrEnum]) -> enum.StrEnum:
    text = _string(value, str)
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{text!r} is not one of {', '.join(repr(m.value) for m in kind)}") from None


def _string(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {kind_of(value)}")
    return value


def _integer(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {kind_of(value)}")
    return value


def _number(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {kind_of(value)}")
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    return float(value)


def _optional_number(value: Any, _: type) -> float | None:
    return None if value is None else _number(value, float)


def _boolean(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {kind_of(value)}")
    return value


def _strings(value: Any, _: type) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected an array of strings, got {kind_of(value)}")
    for index, item in enumerate(value):
        if isinstance(item, dict) and item and set(item) <= set(SecretSource):
            raise TypeError(
                f"item {index} is a secret reference, which is not taken here: a stdio backend gets a secret"
                " through its env (its command line is readable by every local user), never its args"
            )
    _only_strings(enumerate(value), "item {name} is {kind}; every item must be a string")
    return tuple(value)


def _string_table(value: Any, _: type) -> Mapping[str, str]:
    """env, headers, headers_env, tools.rename: strings under names fit for an environment variable."""
    if not isinstance(value, dict):
        raise TypeError(f'expected a table of strings such as {{ TZ = "UTC" }}, got {kind_of(value)}')
    for name in value:
        environment_name(None, None, name)  # the rule inherit_env's items follow
    _only_strings(value.items(), "{name} is {kind}; every value must be a string")
    return dict(value)


def _string_or_secret_table(value: Any, _: type) -> Mapping[str, str | Secret]:
    """env and headers: under each name a plain string (not secret) or a secret reference. Every entry
    that is wrong is reported, each under its own key (`env.API_TOKEN`)."""
    if not isinstance(value, dict):
        example = '{ TZ = "UTC", API_TOKEN = { env = "API_TOKEN" } }'
        raise TypeError(f"expected a table such as {example}, got {kind_of(value)}")
    table: dict[str, str | Secret] = {}
    errors: list[Exception] = []
    for name, item in value.items():
        try:
            environment_name(None, None, name)
        except ValueError as exc:
            errors.append(exc)  # the name itself is wrong: said under the table's key
            continue
        try:
            if isinstance(item, dict):
                table[name] = structure_secret(item)
            elif isinstance(item, str):
                table[name] = item
            else:
                raise TypeError(f"expected a string or a secret ({FORMS}), got {kind_of(item)}")
        except (TypeError, ValueError) as exc:
            errors.append(_noted(exc, dict, name))
    if errors:
        raise ClassValidationError("While structuring a table of strings and secrets", errors, dict)
    return table


def _only_strings(entries: Iterable[tuple[Any, Any]], reason: str) -> None:
    """The first entry that is not a string, if any, raises `reason` with its {name} and {kind}."""
    for name, item in entries:
        if not isinstance(item, str):
            raise TypeError(reason.format(name=name, kind=kind_of(item)))


def _options(value: Any, _: type) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a table, got {kind_of(value)}")
    return value


def _roots(value: Any, _: type) -> RootsMode | tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return RootsMode(value)
        except ValueError:
            modes = ", ".join(repr(mode.value) for mode in RootsMode)
            raise ValueError(f"{value!r} is not one of {modes} or an array of file:// URIs") from None
    uris = _strings(value, tuple)
    for index, uri in enumerate(uris):
        if not uri.startswith("file://"):
            raise ValueError(f"item {index} ({uri!r}) is not a file:// URI")
    return uris


def _integer_table(value: Any, _: type) -> Mapping[str, int]:
    """A table of integers by name (max_output_chars per tool)."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a table such as {{ read_file = 40000 }}, got {kind_of(value)}")
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError(f"{name}: expected an integer, got {kind_of(number)}")
    return dict(value)


def _hint_overrides(value: Any, _: type) -> Mapping[str, Mapping[str, bool]]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a table of tools, got {kind_of(value)}")
    for tool, hints in value.items():
        if not isinstance(hints, dict):
            raise TypeError(
                f"{tool}: expected a table such as {{ readOnlyHint = true }}, got {kind_of(hints)}"
            )
        for hint, flag in hints.items():
            if hint not in HINTS:
                raise ValueError(f"{tool}.{hint}: not one of {', '.join(HINTS)}")
            if not isinstance(flag, bool):
                raise TypeError(f"{tool}.{hint}: expected true or false, got {kind_of(flag)}")
    return {tool: dict(hints) for tool, hints in value.items()}
