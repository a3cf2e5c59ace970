"""A Python reading of the simple rules operators write, so that filtering a list runs no CEL per item.

Handing values to the CEL engine costs microseconds per call (it converts every variable), which is most
of a 500-tool listing's time. Most rules are comparisons of names and claims: `mcp.tool.name == "add"`,
`"admins" in jwt.groups`, `mcp.backend in ["a", "b"]`, `mcp.tool.name.startsWith("git_") && has(jwt.team)`.
`compile_fast` turns such an expression into a Python function over the same variables; anything outside
that subset (arithmetic, ternaries, escapes in strings, macros other than `has`, other functions) gets no
function and always runs on the engine.

The function gives an answer only where CEL's is certain: strings, booleans and integers compared with
their own type, membership of a string in a list of strings or the keys of a map, `&&`/`||`/`!` over
booleans. Anything else (a claim that is missing or of another type, a float, a list compared whole)
raises `Fallback`, and that one evaluation runs on the engine, so an answer never differs from the
engine's (tests/unit/policy/test_fast.py checks both against each other on generated rules and values).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

VARIABLES: Final = frozenset({"jwt", "scopes", "principal", "source", "mcp"})
_TOKEN: Final = re.compile(
    r"""\s*(?:
        (?P<string>"[^"\\\n]*"|'[^'\\\n]*')
      | (?P<int>\d+)(?![\w.])
      | (?P<name>[A-Za-z_]\w*)
      | (?P<op>==|!=|&&|\|\||[!()\[\],.])
    )""",
    re.VERBOSE,
)
_STRING_METHODS: Final = {
    "startsWith": str.startswith,
    "endsWith": str.endswith,
    "contains": str.__contains__,
}
_SCALARS: Final = (str, bool, int)
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

Variables = Mapping[str, Any]
Function = Callable[[Variables], Any]


class Fallback(Exception):
    """This evaluation is not certain in Python: run the engine."""


class NotFast(Exception):
    """The expression is outside the subset: no Python function for it."""


def compile_fast(expression: str) -> Function | None:
    """The rule's Python function, or None when the expression is outside the subset."""
    try:
        tokens = _tokens(expression)
        parser = _Parser(tokens)
        function = parser.expression()
        if parser.at < len(tokens):
            raise NotFast
    except (NotFast, RecursionError):
        return None
    return _boolean(function)


def _tokens(expression: str) -> list[tuple[str, str]]:
    tokens, at, end = [], 0, len(expression.rstrip())
    while at < end:
        match = _TOKEN.match(expression, at)
        if match is None or match.end() == at:
            raise NotFast
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        at = match.end()
    return tokens


class _Parser:
    """Recursive descent in CEL's precedence: || below && below == != in, then !, then selection."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0
        self.literals: dict[Function, Any] = {}  # the functions that give a constant, and their value
        self.paths: dict[Function, tuple[str, ...]] = {}  # the functions that read a variable.field.field

    def literal(self, value: Any) -> Function:
        function = self.literals_of(value)
        self.literals[function] = value
        return function

    @staticmethod
    def literals_of(value: Any) -> Function:
        return lambda variables: value

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end" or (text is not None and token[1] != text):
            raise NotFast
        self.at += 1
        return token

    def expression(self) -> Function:
        left = self.conjunction()
        while self.peek() == ("op", "||"):
            self.take()
            left = _or(left, self.conjunction())
        return left

    def conjunction(self) -> Function:
        left = self.relation()
        while self.peek() == ("op", "&&"):
            self.take()
            left = _and(left, self.relation())
        return left

    def relation(self) -> Function:
        left = self.unary()
        token = self.peek()
        if token in (("op", "=="), ("op", "!=")):
            self.take()
            right = self.unary()
            if right in self.literals or left in self.literals:
                constant, other = (
                    (self.literals[right], left)
                    if right in self.literals
                    else (
                        self.literals[left],
                        right,
                    )
                )
                equal = _equal_constant(other, constant)
            else:
                equal = _equal(left, right)
            return equal if token[1] == "==" else _not(equal)
        if token == ("name", "in"):
            self.take()
            return _member(left, self.unary())
        return left

    def unary(self) -> Function:
        if self.peek() == ("op", "!"):
            self.take()
            return _not(self.unary())
        return self.selection()

    def selection(self) -> Function:
        value = self.primary()
        while self.peek() == ("op", "."):
            self.take()
            kind, name = self.take()
            if kind != "name" or name in ("in", "true", "false", "null"):
                raise NotFast
            if self.peek() == ("op", "("):
                if name not in _STRING_METHODS:
                    raise NotFast
                self.take()
                argument = self.expression()
                self.take(")")
                value = _method(_STRING_METHODS[name], value, argument)
            elif value in self.paths:  # variable.field...: one function walks the whole path
                path = (*self.paths.pop(value), name)
                value = _path(path)
                self.paths[value] = path
            else:
                value = _select(value, name)
        return value

    def primary(self) -> Function:
        kind, text = self.take()
        if kind == "string":
            return self.literal(text[1:-1])
        if kind == "int":
            number = int(text)
            if number > INT64_MAX:
                raise NotFast
            return self.literal(number)
        if kind == "name":
            if text in ("true", "false"):
                return self.literal(text == "true")
            if text == "has" and self.peek() == ("op", "("):
                self.take()
                function = self._has_argument()
                self.take(")")
                return function
            if text not in VARIABLES:
                raise NotFast
            variable = _path((text,))
            self.paths[variable] = (text,)
            return variable
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if text == "[":
            return self._list()
        raise NotFast

    def _has_argument(self) -> Function:
        """has(a.b...c): whether the map a.b... has the key c."""
        start = self.at
        self.selection()
        tokens = self.tokens[start : self.at]
        if len(tokens) < 3 or tokens[-2] != ("op", ".") or tokens[-1][0] != "name":
            raise NotFast
        if any(token[1] == "(" for token in tokens):
            raise NotFast
        owner = _Parser(tokens[:-2]).selection()
        key = tokens[-1][1]

        def has(variables: Variables) -> bool:
            mapping = owner(variables)
            if not isinstance(mapping, dict):
                raise Fallback
            return key in mapping

        return has

    def _list(self) -> Function:
        items: list[Function] = []
        while self.peek() != ("op", "]"):
            items.append(self.expression())
            if self.peek() != ("op", "]"):
                self.take(",")
        self.take("]")
        return lambda variables: [item(variables) for item in items]


def _boolean(function: Function) -> Function:
    def rule(variables: Variables) -> bool:
        value = function(variables)
        if type(value) is not bool:
            raise Fallback
        return value

    return rule


def _flag(function: Function, variables: Variables) -> bool:
    value = function(variables)
    if type(value) is not bool:
        raise Fallback
    return value


def _or(left: Function, right: Function) -> Function:
    # true || anything is true in CEL, errors included; anything uncertain on the left goes to the engine
    return lambda variables: _flag(left, variables) or _flag(right, variables)


def _and(left: Function, right: Function) -> Function:
    return lambda variables: _flag(left, variables) and _flag(right, variables)


def _not(function: Function) -> Function:
    return lambda variables: not _flag(function, variables)


def _equal(left: Function, right: Function) -> Function:
    def equal(variables: Variables) -> bool:
        a, b = left(variables), right(variables)
        if type(a) is not type(b) or type(a) not in _SCALARS:
            raise Fallback
        if type(a) is int and not (INT64_MIN <= a <= INT64_MAX and INT64_MIN <= b <= INT64_MAX):
            raise Fallback  # past int64 the engine converts to uint or double: its answer, not ours
        return bool(a == b)

    return equal


def _equal_constant(function: Function, constant: Any) -> Function:
    """`==` with a literal on one side: the common `mcp.tool.name == "add"`."""
    kind = type(constant)

    def equal(variables: Variables) -> bool:
        value = function(variables)
        if type(value) is not kind or (kind is int and not INT64_MIN <= value <= INT64_MAX):
            raise Fallback
        return bool(value == constant)

    return equal


def _path(names: tuple[str, ...]) -> Function:
    """variable.field.field...: each step a map that has the field, else the engine decides."""
    root, fields = names[0], names[1:]

    def read(variables: Variables) -> Any:
        value = variables[root]
        for name in fields:
            if type(value) is not dict or name not in value:
                raise Fallback
            value = value[name]
        return value

    return read


def _member(item: Function, collection: Function) -> Function:
    def member(variables: Variables) -> bool:
        needle, haystack = item(variables), collection(variables)
        if type(needle) is not str:
            raise Fallback
        if isinstance(haystack, dict):
            return needle in haystack
        if not isinstance(haystack, list | tuple) or any(type(each) is not str for each in haystack):
            raise Fallback
        return needle in haystack

    return member


def _select(owner: Function, name: str) -> Function:
    def select(variables: Variables) -> Any:
        mapping = owner(variables)
        if not isinstance(mapping, dict) or name not in mapping:
            raise Fallback
        return mapping[name]

    return select


def _method(method: Callable[[str, str], bool], receiver: Function, argument: Function) -> Function:
    def call(variables: Variables) -> bool:
        text, part = receiver(variables), argument(variables)
        if type(text) is not str or type(part) is not str:
            raise Fallback
        return method(text, part)

    return call
