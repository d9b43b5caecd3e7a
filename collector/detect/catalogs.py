"""Signal: the catalog of skills shown to the model, in each shape harnesses write it.

Each parser takes prompt text and returns the entries it found, an empty list for a
catalog advertised as empty, or None when the text holds no catalog of that shape.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from evaluators.evidence import CatalogEntry

_XML_BLOCK = re.compile(r"<available_skills>(.*?)</available_skills>", re.DOTALL)
_XML_SKILL = re.compile(r"<skill>(.*?)</skill>", re.DOTALL)
_XML_FIELD = re.compile(r"<(name|description|location)>(.*?)</\1>", re.DOTALL)
_MD_HEADING = re.compile(r"^#{2,4}\s*Available skills\s*$", re.IGNORECASE | re.MULTILINE)
_MD_ITEM = re.compile(r"^\s*[-*]\s+\**`?([A-Za-z0-9][\w.-]*)`?\**\s*[:\u2014-]\s*(.+)$")
_EMPTY = re.compile(r"no skills (?:are )?(?:currently )?available", re.IGNORECASE)


def available_skills_xml(text: str) -> list[CatalogEntry] | None:
    match = _XML_BLOCK.search(text)
    if match is None:
        return None
    entries: list[CatalogEntry] = []
    for skill in _XML_SKILL.finditer(match.group(1)):
        fields = {k: html.unescape(v.strip()) for k, v in _XML_FIELD.findall(skill.group(1))}
        if fields.get("name"):
            entries.append(
                CatalogEntry(fields["name"], fields.get("description", ""), fields.get("location"))
            )
    return entries


def available_skills_markdown(text: str) -> list[CatalogEntry] | None:
    heading = _MD_HEADING.search(text)
    if heading is None:
        return None
    entries: list[CatalogEntry] = []
    for line in text[heading.end() :].lstrip("\n").splitlines():
        if not line.strip():
            if entries:
                break
            continue
        item = _MD_ITEM.match(line)
        if item is None:
            if line.lstrip().startswith("#") or entries:
                break
            if _EMPTY.search(line):
                return []
            continue
        entries.append(CatalogEntry(item.group(1), item.group(2).strip()))
    return entries


# (shape name, cheap substring that must be present, parser)
SHAPES: tuple[tuple[str, str, Callable[[str], list[CatalogEntry] | None]], ...] = (
    ("available_skills_xml", "<available_skills>", available_skills_xml),
    ("available_skills_markdown", "vailable skills", available_skills_markdown),
)
MARKERS: tuple[str, ...] = tuple(marker for _, marker, _ in SHAPES)


def find(text: str) -> tuple[str, list[CatalogEntry]] | None:
    for shape, marker, parser in SHAPES:
        if marker in text:
            entries = parser(text)
            if entries is not None:
                return shape, entries
    return None
