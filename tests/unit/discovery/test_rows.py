"""Words of names, compact rows (signature, first sentence), the backends' summary and the [discovery]
config table."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.config import ConfigError, load_config
from actors.discovery.exposure import summary
from actors.discovery.rows import compact_row, first_sentence, signature
from actors.discovery.settings import DiscoveryMode, DiscoverySettings
from actors.discovery.words import name_words, with_synonyms

BACKEND = '[[backends]]\nname = "a"\ncommand = "python"\n'


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("get_pull_request", ["get", "pull", "request"]),
        ("getPullRequest", ["get", "pull", "request"]),
        ("API-retrieve-a-page", ["api", "retrieve", "a", "page"]),
        ("github__create_issue", ["github", "create", "issue"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("kubectl.get\x00pods", ["kubectl", "get", "pods"]),
    ],
)
def test_names_split_into_words(name: str, words: list[str]) -> None:
    assert name_words(name) == words


def test_a_verb_brings_its_synonyms_and_an_unknown_word_only_itself() -> None:
    assert with_synonyms(["get"])[0][0] == "get"
    assert {"fetch", "read", "retrieve"} <= set(with_synonyms(["get"])[0])
    assert {"add", "new"} <= set(with_synonyms(["create"])[0])
    assert {"remove"} <= set(with_synonyms(["delete"])[0])
    assert {"find", "query"} <= set(with_synonyms(["search"])[0])
    assert with_synonyms(["zebra"]) == [["zebra"]]


def test_a_signature_stars_required_parameters_first_and_shows_defaults() -> None:
    tool = {
        "inputSchema": {
            "type": "object",
            "properties": {
                "state": {"type": "string", "default": "open"},
                "owner": {"type": "string"},
                "labels": {"type": "array", "items": {"type": "string"}},
                "page": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "mode": {"enum": ["a", "b"]},
            },
            "required": ["owner"],
        }
    }
    assert signature(tool) == 'owner*: str, state: str = "open", labels: str[], page: int|null, mode: enum'


@pytest.mark.parametrize(
    "schema",
    [
        None,
        "text",
        {"properties": "x"},
        {"properties": {"a": None}, "required": "a"},
        {"properties": {"a": {"type": 5}}},
    ],
)
def test_a_malformed_schema_still_gets_a_signature(schema: object) -> None:
    assert isinstance(signature({"inputSchema": schema}), str)


def test_a_huge_schema_and_description_are_cut_to_one_short_line() -> None:
    properties = {f"p{i}\n\x1b": {"type": "string", "default": "x" * 1000} for i in range(500)}
    row = compact_row(
        {"name": "t", "inputSchema": {"properties": properties}, "description": "word " * 10_000}
    )
    assert len(row["signature"]) <= 300 and "\n" not in row["signature"] and "\x1b" not in row["signature"]
    assert len(row["summary"]) <= 200


@pytest.mark.parametrize(
    ("description", "sentence"),
    [
        ("Create an issue. Then label it.", "Create an issue."),
        ("Notion | Retrieve a user\nError Responses: 400", "Notion | Retrieve a user"),
        ("Version 1.2 is read. More.", "Version 1.2 is read."),
        (None, ""),
        (42, ""),
    ],
)
def test_the_first_sentence(description: object, sentence: str) -> None:
    assert first_sentence(description) == sentence


def test_the_summary_names_each_backend_with_its_count_and_topics_not_verbs() -> None:
    tools = [
        {"name": n} for n in ("gh__create_issue", "gh__list_issues", "gh__get_branch", "sl__list_channels")
    ]
    assert summary(tools, {}) == "gh (3 tools: issue, issues, branch); sl (1 tool: channels)"
    backends = {"issue": "tracker"}
    assert summary([{"name": "issue"}], backends) == "tracker (1 tool: issue)"


def test_the_summary_of_many_backends_is_bounded() -> None:
    tools = [{"name": f"b{i}__tool_{i}"} for i in range(100)]
    assert summary(tools, {}).endswith("and 84 more backends")


def test_the_discovery_table_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[discovery]\nmode = "auto"\nthreshold_tokens = 2000\npin = ["a"]\n{BACKEND}', encoding="utf-8"
    )
    assert load_config(path).discovery == DiscoverySettings(
        mode=DiscoveryMode.AUTO, threshold_tokens=2000, pin=("a",)
    )
    path.write_text(BACKEND, encoding="utf-8")
    assert load_config(path).discovery is None


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ('mode = "magic"', "discovery.mode", "magic"),
        ("threshold_tokens = 0", "discovery.threshold_tokens", "must be from 1 to 10000000 tokens"),
        ("threshold_tokens = 99999999999", "discovery.threshold_tokens", "must be from 1"),
        ("threshold_tokens = true", "discovery.threshold_tokens", "expected an integer"),
        ('pin = ["a\\u0000b"]', "discovery.pin", "is not a tool name"),
        ('pin = [""]', "discovery.pin", "is not a tool name"),
        (f"pin = [{', '.join(repr(str(i)) for i in range(65))}]", "discovery.pin", "at most 64"),
        ("colour = 1", "discovery.colour", "unknown key"),
    ],
)
def test_a_bad_discovery_key_names_its_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(f"[discovery]\n{text}\n{BACKEND}", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {problem.key: problem.reason for problem in caught.value.problems}
    assert key in problems, problems
    assert reason in problems[key]


def test_a_reload_that_changes_discovery_says_it_needs_a_restart(tmp_path: Path) -> None:
    from actors.config.diff import diff

    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(BACKEND, encoding="utf-8")
    new.write_text(f'[discovery]\nmode = "search"\n{BACKEND}', encoding="utf-8")
    assert "[discovery]" in diff(load_config(old), load_config(new)).needs_restart
    assert "[discovery]" not in diff(load_config(old), load_config(old)).needs_restart
