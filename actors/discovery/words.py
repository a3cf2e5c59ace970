"""Tool names and queries as words: snake_case, camelCase, kebab-case and dotted names split, lower-cased,
and a small table of verb synonyms so "open a pull request" meets `create_pull_request`."""

from __future__ import annotations

import re
from typing import Final

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD: Final = re.compile(r"[a-z0-9]+")

# Each group: words a task may say for one action; a query word gets its group's others as alternatives.
# Actions: a task's verb and the tool's may differ ("open a pull request" -> create_pull_request).
VERB_GROUPS: Final[tuple[frozenset[str], ...]] = (
    frozenset({"get", "fetch", "read", "retrieve", "show", "view", "open", "load", "download"}),
    frozenset({"list", "enumerate", "all", "browse"}),
    frozenset({"create", "add", "new", "make", "open", "post", "write", "insert"}),
    frozenset({"delete", "remove", "drop", "destroy", "erase", "rm"}),
    frozenset({"update", "edit", "modify", "change", "patch", "set", "rename"}),
    frozenset({"search", "find", "query", "lookup", "look", "grep", "locate"}),
    frozenset({"send", "post", "reply"}),
    frozenset({"run", "execute", "exec", "evaluate", "eval", "invoke"}),
    frozenset({"navigate", "goto", "go", "visit", "browse"}),
    frozenset({"merge", "combine"}),
    frozenset({"scrape", "crawl", "extract", "fetch"}),
)
# Things with several names.
NOUN_GROUPS: Final[tuple[frozenset[str], ...]] = (
    frozenset({"screenshot", "snapshot", "capture"}),
    frozenset({"message", "post"}),
    frozenset({"comment", "note", "reply"}),
    frozenset({"pr", "pull", "mr", "merge"}),
    frozenset({"dir", "directory", "folder"}),
    frozenset({"repo", "repository", "project"}),
)
SYNONYM_GROUPS: Final = VERB_GROUPS + NOUN_GROUPS
VERBS: Final = frozenset().union(*VERB_GROUPS)  # what a backend's summary leaves out of its topics
# Words of a task that say nothing of which tool: left out of queries (each would match most descriptions,
# and scoring every row is what makes a query slow on a big catalog).
STOPWORDS: Final = frozenset(
    (  # noqa: SIM905  # a sentence of words reads better than a column of them
        "a an the to of in on at for from by with and or is are be it its this that these those my me i we "
        "our you your some any as into using use via please can could would should"
    ).split()
)
SYNONYMS: Final[dict[str, frozenset[str]]] = {}
for _group in SYNONYM_GROUPS:
    for _word in _group:
        SYNONYMS[_word] = SYNONYMS.get(_word, frozenset()) | (_group - {_word})


def name_words(name: str) -> list[str]:
    """`getPullRequest`, `get_pull_request`, `github__get-pull.request` -> get pull request (github)."""
    spaced = _CAMEL.sub(" ", name)
    return _WORD.findall(spaced.lower())


def text_words(text: str) -> list[str]:
    """Words of free text (a description, a query), camelCase split too."""
    return name_words(text)


def with_synonyms(words: list[str]) -> list[list[str]]:
    """Per query word, the word and its synonyms (the word first)."""
    return [[word, *sorted(SYNONYMS.get(word, frozenset()))] for word in words]
