"""Signal: a read tool whose path ends in SKILL.md and whose result is a SKILL.md."""

from __future__ import annotations

from collector.detect import documents, families, names
from collector.detect.facts import reads as read_facts
from collector.detect.outcome import outcome
from evaluators.evidence import Signal, SkillLoad, ToolCall


def _skill_path(family: families.Family) -> str | None:
    """The SKILL.md path a read tool's arguments name, or None (no read tool, or another file)."""
    if not family.read:
        return None
    arguments = family.arguments
    if isinstance(arguments, dict):
        for key in read_facts.PATH_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, str):
                return (
                    value if value.replace("\\", "/").endswith("/SKILL.md") or value == "SKILL.md" else None
                )
        return None
    if isinstance(arguments, str) and arguments.strip().endswith("SKILL.md"):
        return arguments.strip()
    return None


def detect(call: ToolCall) -> SkillLoad | None:
    return detect_family(families.Family(call))


def detect_family(family: families.Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    path = _skill_path(family)
    if path is None:
        return None
    return read_load(family.call, path, "file_read", family.text())


def read_load(call: ToolCall, path: str, signal: Signal, printed: str) -> SkillLoad:
    """A load by reading a SKILL.md (a read tool or a shell read): only a valid SKILL.md loads.
    A read that the harness marked succeeded without recording what it returned loaded that
    file, its body unknown."""
    status, message = outcome(call)
    document = documents.find(printed) if status == "loaded" else None
    if status == "loaded" and document is None and call.result is not None:
        status, message = "failed", "the read did not return a valid SKILL.md"
    # The segment before SKILL.md, unnormalised: "/skills//SKILL.md" names no skill at all.
    parts = path.replace("\\", "/").split("/")
    folder = parts[-2] if len(parts) > 1 else ""
    skill = document.name if document else folder
    if document and not names.plausible(skill) and names.plausible(folder):
        skill = folder  # a front matter name that is no name ("PDF Report"): its folder's
    return SkillLoad(  # by position: a class called with keywords makes a dict of them
        skill,
        status,
        signal,
        call.span_id,
        call.trace_id,
        call.start_unix_nano,
        document.body if document else None,
        path,
        message,
        call.call_id,
    )
