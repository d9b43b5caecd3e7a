"""Signal: the catalog of skills shown to the model, in each shape harnesses write it.

Each parser takes prompt text and returns the entries it found, an empty list for a
catalog advertised as empty, or None when the text holds no catalog of that shape.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable

from evaluators.evidence import CatalogEntry

_XML_BLOCK = re.compile(r"<available_skills>(.*?)</available_skills>", re.DOTALL)
_XML_SKILL = re.compile(r"<skill>(.*?)</skill>", re.DOTALL)
_XML_FIELD = re.compile(r"<(name|description|location)>(.*?)</\1>", re.DOTALL)
_MD_ITEM = re.compile(r"^[-*]\s+\**`?([A-Za-z0-9][\w.-]*)`?\**\s*:\s*(.*)$")
_FILE_SUFFIX = re.compile(r"\s*\((?:file|path|location):[^)]*\)\s*$")
_EMPTY = re.compile(r"no skills (?:are )?(?:currently )?available", re.IGNORECASE)


def available_skills_xml(text: str) -> list[CatalogEntry] | None:
    """Strands, ADK, Claude API: ``<available_skills><skill><name>..`` (XML-escaped)."""
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


def markdown_list(lead: re.Pattern[str]) -> Callable[[str], list[CatalogEntry] | None]:
    """A ``- name: description`` list under a lead line (heading or sentence)."""

    def parse(text: str) -> list[CatalogEntry] | None:
        found = lead.search(text)
        if found is None:
            return None
        entries: list[CatalogEntry] = []
        for line in text[found.end() :].split("\n"):
            stripped = line.strip()
            if not stripped:
                if entries:
                    break  # a blank line after the items ends the list
                continue
            item = _MD_ITEM.match(stripped) if line[:1] in "-*" else None
            if item is not None:
                entries.append(CatalogEntry(item.group(1), _FILE_SUFFIX.sub("", item.group(2)).strip()))
            elif not entries:
                if _EMPTY.search(stripped):
                    return []
                if stripped.startswith("#"):
                    break
            elif stripped.startswith(("#", "**")):
                break  # the next heading ends the list
            # else: a description running over several lines, or "  -> Read `...`"
        return entries

    return parse


# (shape name, cheap substring that must be present, parser)
SHAPES: tuple[tuple[str, str, Callable[[str], list[CatalogEntry] | None]], ...] = (
    ("available_skills_xml", "<available_skills>", available_skills_xml),
    # OpenAI Agents sandbox, Strands Evals' markdown shape
    (
        "available_skills_markdown",
        "vailable skills",
        markdown_list(re.compile(r"^#{2,4}\s*Available skills\s*$", re.IGNORECASE | re.MULTILINE)),
    ),
    # Deep Agents "## Skills System" ... "**Available Skills:**"
    (
        "deepagents_skills_system",
        "**Available Skills:**",
        markdown_list(re.compile(r"^\*\*Available Skills:\*\*\s*$", re.MULTILINE)),
    ),
    # Claude Code's system reminder
    (
        "claude_skill_tool_list",
        "available for use with the Skill tool",
        markdown_list(re.compile(r"The following skills are available for use with the Skill tool:?")),
    ),
)
MARKERS: tuple[str, ...] = tuple(marker for _, marker, _ in SHAPES)
# The markers as they survive in JSON text: encoders that escape HTML characters (Go's, for
# one) write ``<`` as ``\u003c``, so the XML shape is looked for without its brackets.
RAW_MARKERS: tuple[str, ...] = ("available_skills", *MARKERS[1:])


@functools.lru_cache(maxsize=256)
def find(text: str) -> tuple[str, list[CatalogEntry]] | None:
    """The first shape that parses, with its entries.  Cached: every session of an agent
    shows the same catalog (the result is shared and must not be modified)."""
    for shape, marker, parser in SHAPES:
        if marker in text:
            entries = parser(text)
            if entries is not None:
                return shape, entries
    return None
