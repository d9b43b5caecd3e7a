"""The outcome of a skill-loading call: loaded, failed, denied, or unresolved.

A harness may report a refusal under a success status (a ``Skill 'x' not found`` line, an
``Error: File '...' not found`` line, an ``{"error_code": ...}`` result), so the result is
read as well as the status.
"""

from __future__ import annotations

from typing import Any

from collector.detect import documents
from collector.detect.content import first_truthy, flatten_text, parse_json, result_text
from collector.detect.facts import outcomes as outcome_facts
from collector.detect.facts import reads as read_facts
from evaluators.bytecache import memo_by_text
from evaluators.evidence import LoadStatus, ToolCall


def outcome(call: ToolCall) -> tuple[LoadStatus, str | None]:
    """(status, the harness's message when it did not load)."""
    if call.error is not None:
        text = result_text(call)
        status: LoadStatus = "denied" if outcome_facts.DENIALS.search(text or call.error) else "failed"
        return status, (text or call.error)[:500]
    if call.result is None:
        return ("loaded", None) if call.skill_resolved or call.succeeded else ("unresolved", None)
    return _result_outcome(call.result)


# A skill's SKILL.md, read in many sessions, comes back as the same result text each time:
# the outcome it shows is read once.  Shared; not modified.
@memo_by_text("result_outcomes", 4 * 1024 * 1024, value_factor=0.1)
def _result_outcome(result: str) -> tuple[LoadStatus, str | None]:
    """``text_outcome`` of a recorded result (``result_text``'s reading of it)."""
    parsed = parse_json(result)
    return text_outcome(flatten_text(parsed) if parsed is not None else result, parsed)


def text_outcome(
    text: str, parsed: Any = None, is_error: bool | None = None
) -> tuple[LoadStatus, str | None]:
    """The outcome a recorded result shows: error fields, refusal lines, exit codes.

    Refusals are read before the SKILL.md the result holds (or in its first lines when it
    holds none): a skill's own instructions may well say "Error:" or "denied"."""
    failure = _error_field(parsed) if is_error is None else (text if is_error else None)
    before = documents.head(text)
    # After a SKILL.md only a tool's own footer lines count; with none, the end of the text.
    after = documents.trailer(text) if before is not text else text[-read_facts.EXIT_CODE_TAIL_CHARS :]
    if before is text:
        before = "\n".join(
            text.split("\n", outcome_facts.REFUSAL_HEAD_LINES)[: outcome_facts.REFUSAL_HEAD_LINES]
        )
    if failure is None and _may_refuse(before):
        refusal = outcome_facts.REFUSALS.search(before)
        failure = refusal.group(0).strip() if refusal else None
    if failure is None:
        failure = _exit_code(before[: outcome_facts.EXIT_CODE_HEAD_CHARS]) or _exit_code(after)
    if failure is None:
        return "loaded", None
    status: LoadStatus = (
        "denied"
        if outcome_facts.DENIALS.search(before) or outcome_facts.DENIALS.search(failure)
        else "failed"
    )
    return status, failure[:500]


def _exit_code(text: str) -> str | None:
    code = read_facts.EXIT_CODE.search(text)
    if code and int(code.group(1)) not in read_facts.OK_EXIT_CODES:
        return f"exit code {code.group(1)}"
    return None


def _may_refuse(text: str) -> bool:
    folded = text.casefold()
    for word in outcome_facts.REFUSAL_WORDS:  # noqa: SIM110 - a loop makes no generator per call
        if word in folded:
            return True
    return False


def _error_field(parsed: Any) -> str | None:
    if not isinstance(parsed, dict):
        return None
    for node in (parsed, *(parsed.get(key) for key in outcome_facts.RESULT_WRAPPERS)):
        if not isinstance(node, dict):
            continue
        for key in outcome_facts.ERROR_FIELDS:
            if node.get(key) not in (None, False, "", 0):
                return str(node.get(outcome_facts.ERROR_MESSAGE_FIELD) or node.get(key))
        for key in outcome_facts.EXIT_CODE_FIELDS:
            code = node.get(key)
            if isinstance(code, int) and not isinstance(code, bool) and code not in read_facts.OK_EXIT_CODES:
                return f"exit code {code}"
        for key in outcome_facts.STATUS_FIELDS:
            value = node.get(key)
            if isinstance(value, str) and value.lower() in outcome_facts.FAILED_STATUS_VALUES:
                return str(first_truthy(node, outcome_facts.STATUS_MESSAGE_FIELDS) or value)
    return None
