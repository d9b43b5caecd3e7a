"""Signal: the catalog of skills shown to the model, in each shape harnesses write it.

Each parser takes prompt text and returns the entries it found, an empty list for a
catalog advertised as empty, or None when the text holds no catalog of that shape.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

from collector.detect.facts import catalogs as catalog_facts
from collector.detect.facts import tool_spans as tool_span_facts
from evaluators.bytecache import memo_by_text
from evaluators.evidence import CatalogEntry


def available_skills_xml(text: str) -> list[CatalogEntry] | None:
    """The XML shape: ``<available_skills><skill><name>..`` (XML-escaped), or each skill named
    in its tag: ``<skill name="x">description</skill>``."""
    match = catalog_facts.CATALOG_XML_BLOCK.search(text)
    if match is None:
        return None
    entries: list[CatalogEntry] = []
    for skill in catalog_facts.CATALOG_XML_SKILL.finditer(match.group(1)):
        fields = {
            k: html.unescape(v.strip()) for k, v in catalog_facts.CATALOG_XML_FIELD.findall(skill.group(1))
        }
        if fields.get("name"):
            entries.append(
                CatalogEntry(fields["name"], fields.get("description", ""), fields.get("location"))
            )
    for name, description in catalog_facts.CATALOG_XML_NAMED_SKILL.findall(match.group(1)):
        if name.strip():
            entries.append(CatalogEntry(html.unescape(name.strip()), html.unescape(description.strip())))
    return entries


def names_list(text: str) -> list[CatalogEntry] | None:
    """A JSON array of skill names (``skill_tool_facts.CATALOG_NAME_ATTRIBUTES``): entries without
    descriptions; None for text that is no such array."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    return [CatalogEntry(name.strip()) for name in value if name.strip()]


def listed_in_error(text: str) -> list[CatalogEntry] | None:
    """The skills a failed skill call's error lists as available (``tool_span_facts.CATALOG_IN_ERRORS``):
    entries without descriptions; None when it lists none."""
    found = tool_span_facts.CATALOG_IN_ERRORS.search(text)
    if found is None:
        return None
    listed = found.group(1).strip().rstrip(".\"'`")  # the end of a sentence, or of a quoted error
    return [
        CatalogEntry(name.strip())
        for name in listed.split(tool_span_facts.CATALOG_IN_ERRORS_SEPARATOR)
        if name.strip()
    ]


def markdown_list(lead: re.Pattern[str]) -> Callable[[str], list[CatalogEntry] | None]:
    """A ``- name: description`` list under a lead line (heading or sentence), its items all
    indented as the first one is."""

    def parse(text: str) -> list[CatalogEntry] | None:
        found = lead.search(text)
        if found is None:
            return None
        entries: list[CatalogEntry] = []
        indent: int | None = None  # the items' indent, the first item's: deeper ones are notes
        for line in text[found.end() :].split("\n"):
            stripped = line.strip()
            if not stripped:
                if entries:
                    break  # a blank line after the items ends the list
                continue
            at = len(line) - len(line.lstrip())
            is_item = stripped[:1] in "-*" and (indent is None or at == indent)
            item = catalog_facts.CATALOG_ITEM.match(stripped) if is_item else None
            if item is not None:
                indent = at
                description = catalog_facts.CATALOG_FILE_SUFFIX.sub("", item.group(2)).strip()
                entries.append(CatalogEntry(item.group(1), description))
            elif not entries:
                if catalog_facts.CATALOG_EMPTY.search(stripped):
                    return []
                if stripped.startswith("#"):
                    break
            elif stripped.startswith(("#", "**")):
                break  # the next heading ends the list
            # else: a description running over several lines, or "  -> Read `...`"
        return entries

    return parse


# (shape name, cheap substring that must be present, parser), tried in order.
SHAPES: tuple[tuple[str, str, Callable[[str], list[CatalogEntry] | None]], ...] = (
    (catalog_facts.CATALOG_XML_SHAPE, catalog_facts.CATALOG_XML_MARKER, available_skills_xml),
    *((shape, marker, markdown_list(lead)) for shape, marker, lead in catalog_facts.CATALOG_MARKDOWN_SHAPES),
)
MARKERS: tuple[str, ...] = tuple(marker for _, marker, _ in SHAPES)
# The markers as they survive in JSON text (``catalog_facts.CATALOG_XML_RAW_MARKER``).
RAW_MARKERS: tuple[str, ...] = (
    catalog_facts.CATALOG_XML_RAW_MARKER,
    *(marker for _, marker, _ in catalog_facts.CATALOG_MARKDOWN_SHAPES),
)


@memo_by_text("catalogs", 32 * 1024 * 1024, value_factor=2.0)  # entries: ~2x the text
def find(text: str) -> tuple[str, list[CatalogEntry]] | None:
    """The first shape that parses, with its entries.  Cached: every session of an agent
    shows the same catalog (the result is shared and must not be modified)."""
    for shape, marker, parser in SHAPES:
        if marker in text:
            entries = parser(text)
            if entries is not None:
                return shape, entries
    return None
