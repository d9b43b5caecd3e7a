"""Signal: a tool span whose attributes name the skill it loads (GenAI semconv
``gen_ai.skill.name`` on ``execute_tool``), whatever the tool is called.

Gated on tools the table does not know: a skill, read or shell tool is its own detector's.  The load counts as
loaded only when the span shows it succeeded (a resolved-skill attribute, or a result that
is no refusal); a span with neither is unresolved.
"""

from __future__ import annotations

from collector.detect import documents, families, names
from collector.detect.outcome import outcome
from evaluators.evidence import SkillLoad, ToolCall


def detect(call: ToolCall) -> SkillLoad | None:
    return detect_family(families.Family(call))


def detect_family(family: families.Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    call = family.call
    if not call.skill_attribute or family.known:
        return None
    skill = names.decoded(call.skill_attribute)
    status, message = outcome(call)
    document = documents.find(family.text()) if status == "loaded" and call.result else None
    return SkillLoad(  # by position: a class called with keywords makes a dict of them
        skill,
        status,
        "skill_attribute",
        call.span_id,
        call.trace_id,
        call.start_unix_nano,
        document.body if document else None,
        None,
        message,
        call.call_id,
    )
