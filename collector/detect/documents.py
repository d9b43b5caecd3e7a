"""A SKILL.md in a tool's result, whatever wraps it.

Read tools and shells rarely return a file bare: a header line names the path, a gutter
numbers the lines, an XML or JSON envelope holds the text, a shell prints its exit code
before or after, a long file ends in a truncation marker.  ``find`` takes the document out
of all of these (the rule is on text, the wrappers are rows of ``facts``); ``head`` is what
a result says before its document, where a harness's refusal or exit code would be.
"""

from __future__ import annotations

import re

from collector.detect.content import flatten_text, parse_json
from collector.detect.facts import documents as document_facts
from evaluators import skill_md
from evaluators.bytecache import memo_by_text
from evaluators.skill_md import SkillDocument

_DEPTH = 3  # envelopes inside envelopes, this many at most
_HEADING = re.compile(r"^#{1,3}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_HEADING_LINES = 12  # a heading naming a skill is looked for in a text's first lines
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def headed_by(text: str, skill: str) -> bool:
    """Whether one of the first lines of ``text`` is a Markdown heading naming ``skill``
    ("# Release notes" or "# Skill: release-notes" for ``release-notes``): how a skill's
    body opens when it comes without its front matter."""
    if "#" not in text:
        return False
    want = _slug(skill)
    head = "\n".join(text.split("\n", _HEADING_LINES)[:_HEADING_LINES])
    for heading in _HEADING.finditer(head):
        slug = _slug(heading.group(1))
        if slug == want or slug.endswith("-" + want):
            return True
    return False


def _slug(text: str) -> str:
    return _NOT_SLUG.sub("-", text.casefold()).strip("-")


def find(text: str | None) -> SkillDocument | None:
    """The SKILL.md the text holds (front matter with a name and a description), or None.
    A skill's SKILL.md comes back as the same text in every session that reads it: each text
    is read once (the document returned is shared and must not be modified)."""
    if not text or "---" not in text:
        return None
    return _find(text)


@memo_by_text("documents", 8 * 1024 * 1024, value_factor=1.0)  # a document: about its text
def _find(text: str) -> SkillDocument | None:
    for _ in range(_DEPTH):
        if not text or "---" not in text:
            return None
        document = skill_md.try_parse(text)
        if document is not None:
            return _without_trailer(document)
        unwrapped = _unwrapped(text)
        if unwrapped is None:
            return _from_front_matter(text)
        text = unwrapped
    return None


def head(text: str) -> str:
    """The part of a result before the SKILL.md it holds: all of it when it holds none."""
    opening = _opening(text) if "---" in text else None
    return text if opening is None else text[:opening]


def _unwrapped(text: str) -> str | None:
    """The text inside a JSON or XML envelope, or None if it is in none."""
    stripped = text.strip()
    if stripped[:1] in '{["':
        parsed = parse_json(stripped)
        if parsed is not None:
            inner = flatten_text(parsed)
            return inner if inner and inner != text else None
    envelope = document_facts.XML_ENVELOPE.match(text)
    return envelope.group(2) if envelope is not None else None


def _opening(text: str) -> int | None:
    """Where the front matter opens, if a SKILL.md starts at one of the first "---" lines."""
    for n, line in enumerate(document_facts.FRONT_MATTER_LINE.finditer(text)):
        if n >= document_facts.FRONT_MATTER_TRIES:
            break
        if skill_md.try_parse(text[line.start("open") :]) is not None:
            return line.start("open")
    return None


def _from_front_matter(text: str) -> SkillDocument | None:
    """A document after a header (a path, an exit code, "Output:")."""
    opening = _opening(text)
    if opening is None:
        return None
    document = skill_md.try_parse(text[opening:])
    return _without_trailer(document) if document is not None else None


def trailer(text: str) -> str:
    """The lines a tool appended after what it printed (truncation markers, exit-code
    footers), "" when there are none."""
    body = text.rstrip()
    return body[_trailer_start(body) :]


def _trailer_start(body: str) -> int:
    end = len(body)
    for _ in range(_DEPTH):
        found = document_facts.TRAILER_LINE.search(body, 0, end)
        if found is None:
            break
        end = len(body[: found.start()].rstrip())
    return end


def _without_trailer(document: SkillDocument) -> SkillDocument:
    body = document.body
    end = _trailer_start(body)
    if end == len(body):
        return document
    return SkillDocument(document.name, document.description, body[:end].rstrip(), document.frontmatter)
