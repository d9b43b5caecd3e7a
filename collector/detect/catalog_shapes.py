"""Catalogs by shape: a block that lists skills as name plus description, in whatever format
and under whatever heading or tag a harness writes it.

``find`` reads one piece of text for four formats: XML-like entries (``<x><name>..</name>
<description>..</description></x>`` under any tag, or ``<skill name="..">description</skill>``),
a Markdown list (``- name: description``), a JSON array of ``{"name", "description"}``
objects, and a YAML sequence (``- name: ..`` / ``  description: ..``).  A block is a catalog
when every name it lists passes the skill name rule and it is framed as one of skills: its
lead line, tag or key says "skill", or one of its names is the operator's (``known``).  A
block framed as tools (a tag, key or lead line about tools and not skills, entries with
parameters) is no catalog, nor is a skill's own body (text with headings or front matter).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Collection

from collector.detect import names
from evaluators.bytecache import memo_by_text
from evaluators.evidence import MAX_DESCRIPTION_CHARS, CatalogEntry, fold_skill_name

SHAPE = "by_shape"
CUE = "skill"  # casefolded: what frames a block as one of skills
_TOOL_WORDS = ("tool", "function")
_LEAD_CHARS = 300  # how far before a JSON array its framing is looked for

_XML_ELEMENT = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:-]*)(?:\s[^<>]*)?>\s*<name>\s*(?P<name>[^<]+?)\s*</name>\s*"
    r"<description>\s*(?P<description>.*?)\s*</description>",
    re.DOTALL,
)
_XML_NAMED = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.:-]*)\s+name=\"(?P<name>[^\"]+)\"[^<>]*>(?P<description>[^<]*)</(?P=tag)>"
)
_MD_ITEM = re.compile(
    r"^(?P<indent>[ \t]*)[-*][ \t]+(?:\w+\(\")?\**`?(?P<name>[A-Za-z0-9][\w.:-]*)`?\**(?:\"\))?\**"
    r"[ \t]*(?::|[-\u2013\u2014])[ \t]+(?P<description>\S.*)$",
    re.MULTILINE,
)
_MD_SUFFIX = re.compile(r"\s*\((?:file|path|location):[^)]*\)\s*$")
_YAML_ITEM = re.compile(
    r"^(?P<indent>[ \t]*)-[ \t]+name:[ \t]*[\"']?(?P<name>[^\"'\n]+?)[\"']?[ \t]*\n"
    r"(?P=indent)[ \t]+description:[ \t]*(?P<description>[^\n]+)$",
    re.MULTILINE,
)
_JSON_ARRAY = re.compile(r"\[\s*\{")
_TOOL_KEYS = frozenset({"parameters", "input_schema", "inputSchema", "function", "args", "arguments"})
_HEADING_OR_FRONT_MATTER = re.compile(r"^(?:#{1,6}\s|---\s*$)", re.MULTILINE)


def cued(text: str) -> bool:
    """Whether text may say "skill" in one of its usual cases (skill, Skill, SKILL), as a block
    framed as skills does.  Two substring tests; "kill" alone lets a few more texts through."""
    return "kill" in text or "KILL" in text


def _framed_as_skills(frame: str) -> bool:
    """A tag, key or lead text that frames a block as skills (not only as tools)."""
    return CUE in frame.casefold()


def _lead_frames(lead: str) -> bool:
    """A lead line that introduces a list of skills: a heading, a bold line or a line ending
    in a colon, that says "skill" (a paragraph that mentions skills introduces nothing: a
    tool's description explaining its arguments is one)."""
    stripped = lead.strip()
    introduces = stripped.startswith(("#", "**")) or stripped.endswith(":")
    return introduces and _framed_as_skills(stripped) and not _tools_only(stripped)


def _entries(found: list[tuple[str, str]], skip_bodies: bool = False) -> list[CatalogEntry] | None:
    """Entries of a block, None when one of them is no entry (a name that breaks the rule,
    no description, a body where a description belongs); ``skip_bodies``: a body is left
    out instead (a skill pinned whole beside the catalog's entries)."""
    entries = []
    for name, description in found:
        name, description = html.unescape(name.strip()), html.unescape(description.strip())
        if not names.plausible(name) or not description:
            return None
        if len(description) > MAX_DESCRIPTION_CHARS or _HEADING_OR_FRONT_MATTER.search(description):
            if skip_bodies:
                continue
            return None  # a body, not a description
        entries.append(CatalogEntry(name, _MD_SUFFIX.sub("", description)))
    return entries or None


def _accepted(entries: list[CatalogEntry] | None, framed: bool, known: Collection[str]) -> bool:
    if not entries:
        return False
    return framed or any(fold_skill_name(e.name) in known for e in entries)


def xml_entries(text: str, known: Collection[str]) -> list[CatalogEntry] | None:
    if "<name>" in text and "<description>" in text:
        found = list(_XML_ELEMENT.finditer(text))
        tags = {m.group("tag").casefold() for m in found}
        if found and not any(word in tag for tag in tags for word in _TOOL_WORDS):
            entries = _entries([(m.group("name"), m.group("description")) for m in found])
            framed = any(CUE in tag for tag in tags) or _framed_as_skills(
                text[: found[0].start()][-_LEAD_CHARS:]
            )
            if _accepted(entries, framed, known):
                return entries
    if 'name="' in text:
        found = [m for m in _XML_NAMED.finditer(text) if CUE in m.group("tag").casefold()]
        entries = _entries([(m.group("name"), m.group("description")) for m in found], skip_bodies=True)
        if _accepted(entries, True, known):
            return entries
    return None


def markdown_entries(text: str, known: Collection[str]) -> list[CatalogEntry] | None:
    """Runs of ``- name: description`` items at one indent, each run framed by the line
    before it (a lead line or heading that says "skill")."""
    entries: list[CatalogEntry] = []
    for run in _runs(text):
        start, items = run
        lead = _lead_line(text, start)
        found = _entries([(m.group("name"), m.group("description")) for m in items])
        if _accepted(found, _lead_frames(lead), known):
            entries += found or []
    return entries or None


def _runs(text: str) -> list[tuple[int, list[re.Match[str]]]]:
    """Consecutive items at one indent (lines indented deeper between them are their notes)."""
    runs: list[tuple[int, list[re.Match[str]]]] = []
    last_end = -1
    for item in _MD_ITEM.finditer(text):
        between = text[last_end : item.start()] if last_end >= 0 else None
        same = runs and len(item.group("indent")) == len(runs[-1][1][0].group("indent"))
        if same and between is not None and _only_notes(between, len(item.group("indent"))):
            runs[-1][1].append(item)
        else:
            runs.append((item.start(), [item]))
        last_end = item.end()
    return runs


def _only_notes(between: str, indent: int) -> bool:
    """Text between two items that continues the first: blank, or indented deeper."""
    for line in between.split("\n")[1:-1] if between.count("\n") > 1 else []:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            return False
    return True


def _lead_line(text: str, start: int) -> str:
    """The last non-blank line before ``start``."""
    before = text[:start].rstrip()
    return before[before.rfind("\n") + 1 :]


def _tools_only(lead: str) -> bool:
    folded = lead.casefold()
    return CUE not in folded and any(word in folded for word in _TOOL_WORDS)


def json_entries(text: str, known: Collection[str]) -> list[CatalogEntry] | None:
    """A JSON array of ``{"name", "description"}`` objects inside text, framed by what comes
    before it (or by the key holding it)."""
    decoder = json.JSONDecoder()
    entries: list[CatalogEntry] = []
    for opening in _JSON_ARRAY.finditer(text):
        try:
            value, _ = decoder.raw_decode(text, opening.start())
        except ValueError:
            continue
        found = json_list_entries(value)
        if _accepted(found, _framed_as_skills(text[: opening.start()][-_LEAD_CHARS:]), known):
            entries += found or []
    return entries or None


def json_list_entries(value: object) -> list[CatalogEntry] | None:
    """The entries of a decoded list of ``{"name", "description"}`` objects, None for any
    other value (a list of tool definitions among them)."""
    if not isinstance(value, list) or not value:
        return None
    pairs = []
    for item in value:
        if not isinstance(item, dict) or _TOOL_KEYS & item.keys() or item.get("type") == "function":
            return None
        name, description = item.get("name"), item.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            return None
        pairs.append((name, description))
    return _entries(pairs)


def yaml_entries(text: str, known: Collection[str]) -> list[CatalogEntry] | None:
    found = list(_YAML_ITEM.finditer(text))
    if not found:
        return None
    entries = _entries([(m.group("name"), m.group("description")) for m in found])
    lead = _lead_line(text, found[0].start())
    return entries if _accepted(entries, _lead_frames(lead), known) else None


_FORMATS: tuple[tuple[str, Callable[[str, Collection[str]], list[CatalogEntry] | None]], ...] = (
    ("<", xml_entries),
    ("description:", yaml_entries),
    ('"description"', json_entries),
    (":", markdown_entries),
)


def find(text: str, known: Collection[str] = ()) -> list[CatalogEntry] | None:
    """The skills ``text`` lists by any format above, or None.  ``known``: the registry's
    folded names, which frame a block as skills by themselves."""
    if not known:
        return _find(text)
    for marker, parse in _FORMATS:
        if marker in text:
            entries = parse(text, known)
            if entries:
                return entries
    return None


@memo_by_text("catalog_shapes", 32 * 1024 * 1024, value_factor=2.0)  # entries: ~2x the text
def _find(text: str) -> list[CatalogEntry] | None:
    """``find`` without a registry, cached: every session of an agent shows the same catalog
    (the result is shared and must not be modified)."""
    if CUE not in text.casefold():
        return None
    for marker, parse in _FORMATS:
        if marker in text:
            entries = parse(text, ())
            if entries:
                return entries
    return None
