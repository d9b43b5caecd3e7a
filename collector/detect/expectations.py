"""Which skills a session was expected to load, from config rules and app attributes, and
why: each expectation carries the rule or attribute that made it (``Because``), so the
session page can say so."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from collector.detect.config import Expectation
from collector.otlp.views import Attributes
from evaluators.evidence import Because, fold_skill_name

EXPECTED_SKILLS_ATTRIBUTE = "skillgauge.expected_skills"
_SHOWN = 200  # characters of a matched request kept around the match


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
class Expected:
    """A skill expected of a session, and why."""

    skill: str
    because: Because


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

    def from_attributes(self, *scopes: Attributes, where: tuple[str, ...] = ()) -> list[Expected]:
        """``where``: how to name each scope on the session page (e.g. "span 'chat'", "its
        resource"), in the order of ``scopes``."""
        names = (*where, *(f"attributes #{i + 1}" for i in range(len(where), len(scopes))))
        expected = []
        for scope, name in zip(scopes, names, strict=False):
            if EXPECTED_SKILLS_ATTRIBUTE in scope:
                value = scope.text(EXPECTED_SKILLS_ATTRIBUTE) or ""
                because = Because("expected_skills", EXPECTED_SKILLS_ATTRIBUTE, value, name)
                expected += [Expected(skill, because) for skill in parse_expected(value)]
        for wanted, skills in self.by_attribute:
            if all(any(s.text(k) == v for s in scopes if k in s) for k, v in wanted.items()):
                found = [n for k in wanted for s, n in zip(scopes, names, strict=False) if k in s]
                pattern = ", ".join(f"{k}={v}" for k, v in wanted.items())
                because = Because("attribute", pattern, pattern, found[0] if found else "")
                expected += [Expected(skill, because) for skill in skills]
        return expected

    def from_messages(self, messages: list[str]) -> list[Expected]:
        """``messages``: the user's requests, turn by turn."""
        expected = []
        for pattern, skills in self.by_message:
            for turn, message in enumerate(messages, 1):
                match = pattern.search(message)
                if match:
                    because = Because(
                        "user_message", pattern.pattern, _around(message, match), f"turn {turn}"
                    )
                    expected += [Expected(skill, because) for skill in skills]
                    break
        return expected


def _around(text: str, match: re.Match[str]) -> str:
    """The matched text with a little of the request around it, cut to ``_SHOWN`` characters."""
    start = max(0, match.start() - (_SHOWN - (match.end() - match.start())) // 2)
    shown = text[start : start + max(_SHOWN, match.end() - match.start())]
    return ("..." if start else "") + shown + ("..." if start + len(shown) < len(text) else "")


NO_RULES = Rules((), ())
