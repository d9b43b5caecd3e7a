"""Which skills a session was expected to load, from config rules and app attributes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from collector.detect.config import Expectation
from collector.otlp.views import Attributes
from evaluators.evidence import fold_skill_name

EXPECTED_SKILLS_ATTRIBUTE = "skillgauge.expected_skills"


def parse_expected(value: str) -> list[str]:
    """A JSON list or a comma-separated string of skill names."""
    value = value.strip()
    if value.startswith("["):
        try:
            names = json.loads(value)
        except ValueError:
            names = None
        if isinstance(names, list):
            return [n.strip() for n in names if isinstance(n, str) and n.strip()]
    return [n.strip() for n in value.split(",") if n.strip()]


@dataclass(frozen=True, slots=True)
class Rules:
    """Config expectations, compiled once; with the operator's registry's skill names
    (``known_skills``, folded -> as written), which detection reads as skills' names."""

    by_message: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]
    by_attribute: tuple[tuple[dict[str, str], tuple[str, ...]], ...]
    known_skills: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def compile(cls, rules: tuple[Expectation, ...], known_skills: Iterable[str] = ()) -> Rules:
        return cls(
            known_skills={fold_skill_name(name): name for name in known_skills},
            by_message=tuple(
                (re.compile(r.when.user_message), r.expect) for r in rules if r.when.user_message
            ),
            by_attribute=tuple((r.when.attribute, r.expect) for r in rules if r.when.attribute),
        )

    def from_attributes(self, *scopes: Attributes) -> list[str]:
        expected = []
        for scope in scopes:
            if EXPECTED_SKILLS_ATTRIBUTE in scope:
                expected += parse_expected(scope.text(EXPECTED_SKILLS_ATTRIBUTE) or "")
        for wanted, skills in self.by_attribute:
            if all(any(s.text(k) == v for s in scopes if k in s) for k, v in wanted.items()):
                expected += skills
        return expected

    def from_messages(self, messages: list[str]) -> list[str]:
        return [
            skill
            for pattern, skills in self.by_message
            if any(pattern.search(m) for m in messages)
            for skill in skills
        ]


NO_RULES = Rules((), ())
