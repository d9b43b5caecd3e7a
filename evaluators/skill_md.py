"""Parse and validate SKILL.md files per the Agent Skills specification.

A SKILL.md is YAML frontmatter between ``---`` lines holding at least ``name`` and
``description``, then a Markdown body.  Text read back from a tool often carries line
numbers (``1\\t---``, ``     1→---``, ``     1  ---`` as ``cat -n`` pads them) or a header
(``@@ lines 1-12 of 12 @@``); those are stripped before parsing.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from evaluators.bytecache import memo_by_text

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_HEADER = re.compile(r"^\s*@@[^\n]*@@[ \t]*\n")
# libyaml's loader when present: the pure-Python one dominates detection time otherwise.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A gutter: the number, then its separator (a blank line's may have been trimmed off).
_LINE_NUMBER = re.compile(r"^[ \t]*\d+(?:\t|→|\|[ \t]?|:[ \t]| {2}|[ \t]*$)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class SkillDocument:
    name: str
    description: str
    body: str
    frontmatter: dict[str, object]


class SkillFormatError(ValueError):
    """The text is not a valid SKILL.md; the message says which rule it broke."""


def strip_line_numbers(text: str) -> str:
    text = _HEADER.sub("", text, count=1)
    lines = text.split("\n", 1)
    # Only strip when the very first line is numbered: prose that starts a line with a
    # number must not lose it.
    if lines and _LINE_NUMBER.match(lines[0]):
        text = _LINE_NUMBER.sub("", text)
    return text


def parse(text: str) -> SkillDocument:
    text = strip_line_numbers(text).lstrip("\ufeff").lstrip()
    if not text.startswith("---"):
        raise SkillFormatError("does not start with a '---' frontmatter line")
    end = re.search(r"^---[ \t]*$", text[3:], re.MULTILINE)
    if end is None:
        raise SkillFormatError("frontmatter has no closing '---' line")
    raw, body = text[3 : 3 + end.start()], text[3 + end.end() :]
    try:
        meta = yaml.load(raw, Loader=_LOADER)  # a safe loader, C or Python
    except yaml.YAMLError as err:
        raise SkillFormatError(f"frontmatter is not valid YAML: {err}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("frontmatter is not a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillFormatError("frontmatter has no 'name'")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("frontmatter has no 'description'")
    return SkillDocument(name.strip(), description.strip(), body.strip(), meta)


def try_parse(text: str | None) -> SkillDocument | None:
    if not text or "---" not in text:
        return None
    return _cached(text)


@memo_by_text("skill_md", 16 * 1024 * 1024, value_factor=2.0)  # name, description, body, meta
def _cached(text: str) -> SkillDocument | None:
    # The same few SKILL.md files are read in thousands of sessions.
    try:
        return parse(text)
    except SkillFormatError:
        return None


def spec_problems(doc: SkillDocument, directory: str | None = None) -> list[str]:
    """Strict spec checks for skills the operator ships (lenient parsing above is for traces)."""
    problems = []
    if not 1 <= len(doc.name) <= 64 or not NAME.match(doc.name):
        problems.append(f"name {doc.name!r} must be 1-64 chars of a-z, 0-9 and single hyphens")
    if directory is not None and directory != doc.name:
        problems.append(f"name {doc.name!r} must match its folder {directory!r}")
    if len(doc.description) > 1024:
        problems.append("description is longer than 1024 characters")
    if not doc.body:
        problems.append("has no instructions after the frontmatter")
    return problems
