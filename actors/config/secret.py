"""Secrets by reference: a secret in the config is written as where its value comes from, never as the value.

    API_TOKEN = { env = "FS_TOKEN" }                       the gateway's environment variable FS_TOKEN
    API_TOKEN = { file = "/run/credentials/gw/fs-token" }  a file (systemd credentials); relative paths
                                                            against the config file's folder
    API_TOKEN = { value = "..." }                          a literal, written on purpose (`check` warns)

The converter makes a Secret of the table (nothing read); resolve_secret reads its value once, at load and
at every reload, and a reference that cannot be read is a load problem `FILE: key: reason` whose reason
names the variable or the file, never a value. A Secret's repr, str and JSON form name it
(`env:FS_TOKEN`); only `reveal()` gives the value, where it is handed on: a backend's environment, a header
of a request. Every resolved value is looked for by the redactor (Config.secret_values, runtime/redact.py).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from actors.config.checks import is_environment_name
from actors.config.errors import Problem
from actors.config.files import NotReadableError, read_regular_file, shown_path

MAX_FILE_BYTES: Final = 64 * 1024  # a token, a password, a PEM key: a few KB at most
FORMS: Final = '{ env = "NAME" }, { file = "/run/credentials/..." } or { value = "..." }'


@attrs.frozen
class Carrier:
    """Where a secret's value is handed on, and what such a value cannot hold."""

    name: str
    refused: re.Pattern[str]


VARIABLE: Final = Carrier("an environment variable", re.compile("\x00"))  # a line break may: a PEM key
# a tab may; the HTTP clients write a header's value as ASCII (httpx raises on any other character)
HEADER: Final = Carrier("an HTTP header", re.compile("[^\t\x20-\x7e]"))


class SecretSource(enum.StrEnum):
    ENV = "env"  # an environment variable of the gateway's
    FILE = "file"  # a file's content, without its trailing line breaks
    VALUE = "value"  # a literal in the config file, written on purpose


@attrs.frozen(repr=False)
class Secret:
    """A secret the config refers to: its source and `where` (a variable's name, a file's path as written,
    the key of a literal), and its value once resolved. Equal when source, place and value are: a reload
    that reads a new value changes what holds it."""

    source: SecretSource
    where: str
    _value: str | None = attrs.field(default=None, alias="value")
    path: Path | None = None  # a file's path, made absolute when resolved

    @property
    def name(self) -> str:
        """What the gateway calls it wherever it speaks of it: `env:FS_TOKEN`, `file:/run/...`,
        `value:backends[0].env.API_TOKEN`."""
        return f"{self.source}:{self.where}"

    @property
    def resolved(self) -> bool:
        return self._value is not None

    def reveal(self) -> str:
        """The value, for where it is handed on; never for a log, an error or a page."""
        if self._value is None:
            raise ValueError(f"secret {self.name} was not resolved")
        return self._value

    def as_json(self) -> dict[str, str]:
        return {"secret": self.name}

    def __repr__(self) -> str:
        return f"Secret({self.name})"

    def __str__(self) -> str:
        return f"<secret {self.name}>"


def structure_secret(raw: Any) -> Secret:
    """A secret reference as written: a table with exactly one of env, file and value, each a string."""
    if not isinstance(raw, dict):
        kind = type(raw).__name__ if not isinstance(raw, str) else "a string"
        raise TypeError(f"expected a secret reference such as {FORMS}, got {kind}")
    unknown = sorted(set(raw) - set(SecretSource))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in a secret reference ({FORMS})")
    if len(raw) != 1:
        raise ValueError(f"a secret reference sets exactly one of env, file and value ({FORMS})")
    ((source, text),) = raw.items()
    if not isinstance(text, str):
        raise TypeError(f"{source}: expected a string")
    if not text:
        raise ValueError(f"{source}: must not be empty")
    if source == SecretSource.ENV and not (is_environment_name(text) and text.isprintable()):
        raise ValueError(f"env: {text!r} is not a valid environment variable name")
    if source == SecretSource.VALUE:
        return Secret(SecretSource.VALUE, "", value=text)  # named by its key once resolved
    return Secret(SecretSource(source), text)


def resolve_secret(
    secret: Secret, key: str, folder: Path, problems: list[Problem], carrier: Carrier = VARIABLE
) -> Secret:
    """`secret` with its value read: from the environment, from its file (relative to `folder`; its
    trailing line breaks stripped), or the literal itself, named by `key`. A value `carrier` cannot hold is
    refused. A problem names the variable or the file, never a value; the secret is then left unresolved."""
    if secret.source is SecretSource.VALUE:
        value: str | None = secret.reveal()
        resolved = Secret(SecretSource.VALUE, key, value=value)
    elif secret.source is SecretSource.ENV:
        value = os.environ.get(secret.where) or None
        if value is None:
            problems.append((key, f"environment variable {secret.where} is not set or empty"))
        resolved = Secret(SecretSource.ENV, secret.where, value=value)
    else:
        path = (folder / Path(secret.where).expanduser()).resolve()
        value = _read(secret.where, path, key, problems)
        resolved = Secret(SecretSource.FILE, secret.where, value=value, path=path)
    if value is not None and carrier.refused.search(value):
        reason = _what_it_holds(value)
        problems.append((key, f"{resolved.name} holds {reason}, which {carrier.name} cannot carry"))
        return attrs.evolve(resolved, value=None)
    return resolved


def _what_it_holds(value: str) -> str:
    """What makes a value unfit for its carrier, as its load problem says it."""
    if "\0" in value:
        return "a NUL character"
    if any((char < " " and char != "\t") or char == "\x7f" for char in value):
        return "a line break or a control character"
    return "a character outside ASCII"


def _read(written: str, path: Path, key: str, problems: list[Problem]) -> str | None:
    shown = shown_path(written, path)
    try:
        data = read_regular_file(path, MAX_FILE_BYTES, what="a file holding the secret")
        text = data.decode("utf-8").rstrip("\r\n")
    except FileNotFoundError:
        problems.append((key, f"secret file {shown} does not exist"))
        return None
    except IsADirectoryError:
        problems.append((key, f"secret file {shown} is a directory"))
        return None
    except UnicodeDecodeError:
        problems.append((key, f"secret file {shown} is not UTF-8 text"))
        return None
    except NotReadableError as exc:
        problems.append((key, f"secret file {shown}: {exc}"))
        return None
    except OSError as exc:
        problems.append((key, f"cannot read secret file {shown}: {exc.strerror or exc}"))
        return None
    if not text:
        problems.append((key, f"secret file {shown} is empty"))
        return None
    return text


def revealed(values: Mapping[str, str | Secret]) -> dict[str, str]:
    """A table of plain strings and secrets, as handed on: every secret's value in its place (an
    unresolved one left out: its load failed)."""
    return {
        name: value.reveal() if isinstance(value, Secret) else value
        for name, value in values.items()
        if not isinstance(value, Secret) or value.resolved
    }


def secrets_in(values: Mapping[str, str | Secret]) -> list[Secret]:
    return [value for value in values.values() if isinstance(value, Secret)]
