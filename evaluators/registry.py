"""The operator's own skills: ``<name>/SKILL.md`` folders, read once at start-up.

Traces often lack what a judge needs (Claude Code's ``Skill`` result is only ``Launching
skill: x``; ADK records no content by default; many harnesses record no catalog).  The
registry fills those gaps, and every result that used it says so (``body_source`` /
``catalog_source`` = ``registry``).  Where a trace carries a body, the trace wins; a body
that differs from the registry's copy is reported as a mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evaluators import skill_md
from evaluators.evidence import CatalogEntry, fold_skill_name


class RegistryError(ValueError):
    """One or more skill folders are unusable; the message lists every problem with its path."""


@dataclass(frozen=True, slots=True)
class RegisteredSkill:
    name: str
    description: str
    body: str
    path: str


@dataclass(frozen=True, slots=True)
class SkillRegistry:
    """The skills as read at start-up; nothing changes them after."""

    skills: dict[str, RegisteredSkill] = field(default_factory=dict)  # folded name -> skill
    # The catalog entries, made once: every session with no catalog of its own reads them.
    entries: tuple[CatalogEntry, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries = tuple(CatalogEntry(s.name, s.description, s.path) for s in self.skills.values())
        object.__setattr__(self, "entries", entries)

    def get(self, name: str) -> RegisteredSkill | None:
        return self.skills.get(fold_skill_name(name))

    def __len__(self) -> int:
        return len(self.skills)


EMPTY = SkillRegistry()


def build(documents: Iterable[tuple[str, str, str]]) -> SkillRegistry:
    """``(folder name, SKILL.md text, path)`` triples -> a registry, or every problem at once."""
    skills: dict[str, RegisteredSkill] = {}
    problems: list[str] = []
    for folder, text, path in documents:
        try:
            doc = skill_md.parse(text)
        except skill_md.SkillFormatError as err:
            problems.append(f"{path}: {err}")
            continue
        problems += [f"{path}: {p}" for p in skill_md.spec_problems(doc, folder)]
        key = fold_skill_name(doc.name)
        if key in skills:
            problems.append(f"{path}: skill {doc.name!r} is already defined by {skills[key].path}")
            continue
        skills[key] = RegisteredSkill(doc.name, doc.description, doc.body, path)
    if problems:
        raise RegistryError("; ".join(problems))
    return SkillRegistry(skills)


def load_registry(paths: Iterable[str]) -> SkillRegistry:
    """Read every ``<dir>/<name>/SKILL.md`` under the given directories (spec-checked)."""
    documents: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for raw in paths:
        root = Path(raw)
        if not root.is_dir():
            problems.append(f"{raw}: not a directory of <name>/SKILL.md folders")
            continue
        found = sorted(root.glob("*/SKILL.md"))
        if not found:
            problems.append(f"{raw}: holds no <name>/SKILL.md")
        for path in found:
            try:
                documents.append((path.parent.name, path.read_text(encoding="utf-8"), str(path)))
            except (OSError, UnicodeDecodeError) as err:
                problems.append(f"{path}: cannot read ({err})")
    try:
        registry = build(documents)
    except RegistryError as err:
        problems.append(str(err))
        registry = EMPTY
    if problems:
        raise RegistryError("; ".join(problems))
    return registry


_SPACE = re.compile(r"\s+")


def same_body(traced: str, registered: str) -> bool:
    """Whether a traced body is the registry's body, give or take what harnesses add.

    Harnesses decorate what they return (frontmatter kept or stripped, a ``Location:``
    trailer, line numbers), so the test is containment after whitespace folding.
    """
    doc = skill_md.try_parse(traced)
    text = doc.body if doc is not None else skill_md.strip_line_numbers(traced)
    return _SPACE.sub(" ", registered).strip() in _SPACE.sub(" ", text).strip()
