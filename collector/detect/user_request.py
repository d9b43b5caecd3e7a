"""The user's own words in a user-role message: the text with what the harness injected
around them removed.

A harness puts structured context into the user's turn beside (or instead of) what the
user typed: tagged blocks (``<system-reminder>``, ``<environment_context>``,
``<session_context>`` with the workspace's folder tree, a pinned ``<skill>`` body), folder
trees, pasted catalogs, SKILL.md bodies, files it expanded, and preambles of its own.  The
rule is general: a block that is structured context rather than prose is removed wherever
it sits; the few harness-specific markers are data in ``facts``.

- A tagged block is an XML-like element whose opening tag starts a line and whose closing
  tag (the same name, the first after it) ends one, or a line holding a lone tag
  (``<elided>``).  Blocks of
  markup a person pastes (``prompt_facts.USER_MARKUP_TAGS``: ``<div>``, ``<table>``...) are kept,
  and so is a tag inside a sentence.
- A folder tree is a run of lines drawn with tree connectors (``├──``, ``└──``, ``|--``),
  with the root line above it when that line names a folder.
- A catalog is a Markdown heading naming skills followed by its list of entries.
- A SKILL.md body starts at front matter holding a ``name`` and a ``description``, and runs
  to the end of the message.
- A whole message the harness writes itself (``prompt_facts.HARNESS_MESSAGES``), a skill body it
  injects after a skill tool call (``injection_facts.BASE_DIRECTORY_PREFIX``) or a message made only
  of injected blocks is no request: "".

Pure and per message: the session calls it once for each user text it has not seen (never
per span), so its cost is the turn count, not the span count.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from collector.detect.facts import injections as injection_facts
from collector.detect.facts import prompts as prompt_facts
from evaluators import skill_md

# An opening tag that starts a line (its attributes on that line), and a closing tag that
# ends one.  A block runs from an opening tag to the first closing tag of its name after it.
_OPEN_TAG = re.compile(r"^[ \t]*<(?P<name>[A-Za-z][\w.:-]*)(?:\s[^<>\n]*)?(?P<closed>/?)>", re.MULTILINE)
_CLOSE_TAG = re.compile(r"</(?P<name>[A-Za-z][\w.:-]*)>[ \t]*$", re.MULTILINE)
# A line that is one closing tag and nothing else.
_LONE_CLOSE = re.compile(r"^[ \t]*</(?P<name>[A-Za-z][\w.:-]*)>[ \t]*$", re.MULTILINE)
# One line of a drawn folder tree: connectors, then a name.
_TREE_LINE = re.compile(r"^[ \t│|]*(?:[├└]─+|[|`+]-{2,})")
# The root a tree hangs from: a path ending in a separator (``/project/``, ``src\\``) or a colon.
_TREE_ROOT = re.compile(r"^\s*\S+[/\\:]\s*$")
# A Markdown heading that names skills, and the list entries under it.
_CATALOG_HEADING = re.compile(r"^\s*#{1,6}\s.*\bskills?\b", re.IGNORECASE)
_LIST_ENTRY = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
_FRONT_MATTER = re.compile(r"^---[ \t]*$", re.MULTILINE)
_FRONT_MATTER_TRIES = 8  # "---" lines tried as a SKILL.md's start, in a message


def user_request(text: str) -> str:
    """The words the user typed in ``text`` (one user-role message's text), stripped of
    surrounding blank space; "" when the message holds nothing the user wrote."""
    text = prompt_facts.USER_TEXT_PREAMBLE.sub("", text, count=1)
    stripped = text.strip()
    if not stripped or stripped.startswith(injection_facts.BASE_DIRECTORY_PREFIX):
        return ""
    if prompt_facts.HARNESS_MESSAGES.fullmatch(stripped):
        return ""
    if "<" in text:
        text = _without_tagged_blocks(text)
    if "--- Content from" in text:
        text = prompt_facts.INLINED_FILES_BLOCK.sub("", text)
    if "---" in text:
        text = _without_skill_body(text)
    text = _without_drawn_blocks(text).strip()
    quoted = prompt_facts.QUOTED_REQUEST.match(text)
    return quoted.group(1).strip() if quoted is not None else text


def _without_tagged_blocks(text: str) -> str:
    """``text`` without its tagged blocks and lone tag lines (of any name but the markup a
    person pastes).  One pass over the text for the closing tags, one for the opening ones:
    linear, whatever the text holds (an unclosed tag costs no search to the end)."""
    closes: dict[str, tuple[list[int], list[int]]] = {}  # name -> (starts, ends), in order
    for found in _CLOSE_TAG.finditer(text):
        starts, ends = closes.setdefault(found.group("name"), ([], []))
        starts.append(found.start())
        ends.append(found.end())
    kept: list[str] = []
    at = 0
    for found in _OPEN_TAG.finditer(text):
        name = found.group("name")
        if found.start() < at or name.lower() in prompt_facts.USER_MARKUP_TAGS:
            continue  # inside a block removed already, or markup the user pasted
        starts, ends = closes.get(name, ([], []))
        after = bisect_left(starts, found.end())
        if not found.group("closed") and after < len(starts):
            end = ends[after]
        else:  # no closing tag: only a tag alone on its line goes
            line_end = text.find("\n", found.end())
            end = len(text) if line_end < 0 else line_end
            if text[found.end() : end].strip():
                continue
        kept.append(text[at : found.start()])
        at = end
    kept.append(text[at:])
    return _LONE_CLOSE.sub(_unless_markup, "".join(kept))


def _unless_markup(found: re.Match[str]) -> str:
    return found.group(0) if found.group("name").lower() in prompt_facts.USER_MARKUP_TAGS else ""


def _without_skill_body(text: str) -> str:
    """``text`` cut where a SKILL.md (front matter with a name and a description) starts.
    The first few ``---`` lines are tried (each try parses from there to the end)."""
    for tried, found in enumerate(_FRONT_MATTER.finditer(text)):
        if tried == _FRONT_MATTER_TRIES:
            break
        try:
            skill_md.parse(text[found.start() :])  # not ``try_parse``: it caches what it reads
        except skill_md.SkillFormatError:
            continue
        return text[: found.start()]
    return text


def _without_drawn_blocks(text: str) -> str:
    """``text`` without folder trees (and the root line each hangs from) and without
    Markdown catalogs of skills (a heading naming skills, then its list entries)."""
    if "──" not in text and "--" not in text and "#" not in text:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    at, in_tree = 0, False
    while at < len(lines):
        line = lines[at]
        if _TREE_LINE.match(line):
            if not in_tree and kept and _TREE_ROOT.match(kept[-1]):
                kept.pop()
            in_tree = True
            at += 1
            continue
        in_tree = False
        if _CATALOG_HEADING.match(line):
            after = at + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            entries = after
            while entries < len(lines) and (_LIST_ENTRY.match(lines[entries]) or not lines[entries].strip()):
                entries += 1
            if entries > after:  # a heading over a list: a catalog
                at = entries
                continue
        kept.append(line)
        at += 1
    return "\n".join(kept)


__all__ = ["user_request"]
