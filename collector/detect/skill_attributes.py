"""Signal: a tool span whose attributes name the skill it loads (GenAI semconv
``gen_ai.skill.name`` on ``execute_tool``), whatever the tool is called.

Gated on tools the table does not know: a skill, read or shell tool is its own detector's.  The load counts as
loaded only when the span shows it succeeded (a resolved-skill attribute, or a result that
is no refusal); a span with neither is unresolved.
"""

from __future__ import annotations

from collector.detect import documents, families, names
from collector.detect.content import result_text
from collector.detect.outcome import outcome
from evaluators.evidence import SkillLoad, ToolCall


def detect(call: ToolCall) -> SkillLoad | None:
    if not call.skill_attribute or families.known(call):
        return None
    skill = names.decoded(call.skill_attribute)
    status, message = outcome(call)
    document = documents.find(result_text(call)) if status == "loaded" and call.result else None
    return SkillLoad(
        skill=skill,
        status=status,
        signal="skill_attribute",
        span_id=call.span_id,
        trace_id=call.trace_id,
        time_unix_nano=call.start_unix_nano,
        body=document.body if document else None,
        message=message,
        tool_call_id=call.call_id,
    )
