"""The outcome of a skill-loading call: loaded, failed, denied, or unresolved.

A harness may report a refusal under a success status (Strands' ``Skill 'x' not found``,
Deep Agents' ``Error: File '...' not found``, ADK's ``{"error_code": ...}``), so the
result is read as well as the status.
"""

from __future__ import annotations

import re
from typing import Any

from collector.detect import facts
from collector.detect.content import parse_json, result_text
from evaluators.evidence import LoadStatus, ToolCall

_EXIT_CODE = re.compile(r"(?:exit(?:ed with)? code|exit_code)\W{0,3}(-?\d+)", re.IGNORECASE)


def outcome(call: ToolCall) -> tuple[LoadStatus, str | None]:
    """(status, the harness's message when it did not load)."""
    if call.error is not None:
        text = result_text(call)
        status: LoadStatus = "denied" if facts.DENIALS.search(text or call.error) else "failed"
        return status, (text or call.error)[:500]
    if call.result is None:
        return ("loaded", None) if call.skill_resolved else ("unresolved", None)
    return text_outcome(result_text(call), parse_json(call.result))


def text_outcome(
    text: str, parsed: Any = None, is_error: bool | None = None
) -> tuple[LoadStatus, str | None]:
    """The outcome a recorded result shows: error fields, refusal lines, exit codes."""
    failure = _error_field(parsed) if is_error is None else (text if is_error else None)
    if failure is None and _may_refuse(text):
        refusal = facts.REFUSALS.search(text)
        failure = refusal.group(0).strip() if refusal else None
    if failure is None:
        code = _EXIT_CODE.search(text[-200:])
        if code and int(code.group(1)) not in facts.OK_EXIT_CODES:
            failure = f"exit code {code.group(1)}"
    if failure is None:
        return "loaded", None
    status: LoadStatus = "denied" if facts.DENIALS.search(text) else "failed"
    return status, failure[:500]


def _may_refuse(text: str) -> bool:
    folded = text.casefold()
    for word in facts.REFUSAL_WORDS:  # noqa: SIM110 - a loop makes no generator per call
        if word in folded:
            return True
    return False


def _error_field(parsed: Any) -> str | None:
    for node in (parsed, parsed.get("data") if isinstance(parsed, dict) else None):
        if not isinstance(node, dict):
            continue
        for key in facts.ERROR_FIELDS:
            if node.get(key) not in (None, False, "", 0):
                return str(node.get("error") or node.get(key))
        for key in facts.STATUS_FIELDS:
            value = node.get(key)
            if isinstance(value, str) and value.lower() in facts.FAILED_STATUS_VALUES:
                return str(node.get("content") or node.get("message") or value)
    return None
