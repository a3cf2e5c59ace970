"""What a config that cannot be used raises: ConfigError, with one ConfigProblem per reason."""

from __future__ import annotations

import attrs

# (key as written in the file, such as "backends[1].restart.policy"; reason). The loader collects these,
# then names the file once in ConfigError.
Problem = tuple[str, str]


@attrs.frozen
class ConfigProblem:
    file: str
    key: str  # "" when the problem is the file itself
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.reason}" if self.key else f"{self.file}: {self.reason}"


class ConfigError(Exception):
    """The config cannot be used; `problems` lists every reason."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems
