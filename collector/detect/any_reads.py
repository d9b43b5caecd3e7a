"""Signal: a SKILL.md returned by a tool no row of ``facts`` knows.

Gated on tools the table does not know, with no attribute naming a skill.  A call whose result holds a SKILL.md (front matter with a
name and a description, however wrapped) read that skill, unless the tool's name says it
writes (``read_facts.WRITE_TOOL_WORDS``: an edit tool echoing what it wrote).  The path is the
argument ending in ``SKILL.md`` when there is one.  A call whose arguments name the skill by
its name, not its path, is a skill tool (``skill_shapes``), not a read.
"""

from __future__ import annotations

from typing import Any

from collector.detect import documents, families, skill_shapes
from collector.detect.file_reads import read_load
from evaluators.evidence import SkillLoad, ToolCall

_SKILL_FILE = "SKILL.md"


def detect(call: ToolCall) -> SkillLoad | None:
    return detect_family(families.Family(call))


def detect_family(family: families.Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    call = family.call
    result = call.result
    # Cheap tests first: a SKILL.md has a front matter line and a description field.
    if not result or "---" not in result or "description" not in result or not family.unnamed:
        return None
    if family.writes:
        return None
    text = family.text()
    document = documents.find(text)
    if document is None or skill_shapes.names_in(family.arguments, document.name):
        return None
    path = _skill_path(family.arguments) or f"{document.name}/{_SKILL_FILE}"
    return read_load(call, path, "file_read", text)


def _skill_path(arguments: Any) -> str | None:
    values = arguments.values() if isinstance(arguments, dict) else [arguments]
    for value in values:
        if isinstance(value, str) and value.strip().endswith(_SKILL_FILE):
            return value.strip()
    return None
