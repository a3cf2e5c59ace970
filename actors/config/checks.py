"""The rules a config value must pass, written as attrs validators and declared on the fields they check.

Each raises ValueError with the reason the operator reads after `FILE: key: `. The loader runs a field's
validator only on a key the file sets, with `instance` holding the table's other values as loaded (or their
defaults), so a rule may compare two keys. Values arrive typed: numbers are finite, strings are strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from cattrs.errors import AttributeValidationNote, ClassValidationError, IterableValidationNote

Validator = Callable[[Any, Any, Any], None]  # (instance, attribute, value), as attrs calls it

# Field metadata: what to say when a required key is missing, if more than "required key is missing".
WHEN_MISSING: Final = "when_missing"


def rule(passes: Callable[[Any], object], reason: str) -> Validator:
    """A validator: `passes(value)` must be true, else `reason` (with `{value!r}` filled in)."""

    def check(_instance: Any, _attribute: Any, value: Any) -> None:
        if not passes(value):
            raise ValueError(reason.format(value=value))

    return check


def at_least(lowest: int, reason: str | None = None) -> Validator:
    return rule(lambda value: value >= lowest, reason or f"must be {lowest} or more")


def not_below(other: str) -> Validator:
    """The value must not be less than the table's key `other`."""

    def check(instance: Any, _attribute: Any, value: Any) -> None:
        if value < getattr(instance, other):
            raise ValueError(f"must not be less than {other}")

    return check


def not_above(other: str) -> Validator:
    """The value must not be more than the table's key `other`."""

    def check(instance: Any, _attribute: Any, value: Any) -> None:
        if value > getattr(instance, other):
            raise ValueError(f"must not be more than {other}")

    return check


def is_environment_name(name: str) -> bool:
    return bool(name) and "=" not in name and "\0" not in name


ENVIRONMENT_NAME: Final = "{value!r} is not a valid environment variable name"
positive: Final = rule(lambda value: value > 0, "must be greater than 0")
not_blank: Final = rule(lambda text: text.strip(), "must not be empty")
environment_name: Final = rule(is_environment_name, ENVIRONMENT_NAME)
MIN_MESSAGE_BYTES: Final = 1024
message_size: Final = at_least(
    MIN_MESSAGE_BYTES, f"must be at least {MIN_MESSAGE_BYTES}"
)  # max_message_bytes


def every(check: Validator) -> Validator:
    """`check` on each item of a tuple (a failure reported as `key[index]`) or each value of a table
    (`key.name`); every failing one is reported."""

    def each(instance: Any, attribute: Any, values: tuple[Any, ...] | Mapping[str, Any]) -> None:
        errors: list[Exception] = []
        entries = values.items() if isinstance(values, Mapping) else enumerate(values)
        for where, item in entries:
            try:
                check(instance, attribute, item)
            except ValueError as exc:
                if isinstance(where, int):
                    exc.add_note(IterableValidationNote(f"item {where}", where, type(item)))
                else:
                    exc.add_note(AttributeValidationNote(f"entry {where}", where, type(item)))
                errors.append(exc)
        if errors:
            raise ClassValidationError("entries that break a rule", errors, type(values))

    return each
