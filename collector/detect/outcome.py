"""The outcome of a skill-loading call: loaded, failed, or unresolved.

A harness may report a refusal under a success status (Strands' ``Skill 'x' not found``,
ADK's ``{"error_code": "SKILL_NOT_FOUND"}``), so the result text is read as well.
"""

from __future__ import annotations

from collector.detect import patterns
from collector.detect.content import parse_json, result_text
from evaluators.evidence import LoadStatus, ToolCall


def outcome(call: ToolCall) -> tuple[LoadStatus, str | None]:
    """(status, the harness's message when it failed)."""
    if call.error is not None:
        return "failed", (result_text(call) or call.error)[:500]
    if call.result is None:
        return "unresolved", None
    parsed = parse_json(call.result)
    if isinstance(parsed, dict):
        for key in patterns.ERROR_FIELDS:
            if parsed.get(key) not in (None, False, "", 0):
                return "failed", str(parsed.get("error") or parsed.get(key))[:500]
    text = result_text(call)
    refusal = patterns.REFUSALS.search(text)
    if refusal is not None:
        return "failed", refusal.group(0).strip()[:500]
    return "loaded", None
