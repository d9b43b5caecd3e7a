"""Tool calls reported by log records, and how they meet the tool spans of the same calls.

A harness may log each tool call beside or instead of a tool span (``log_facts.LOG_TOOL_CALLS``:
which records, and their keys).  A record that holds what the tool returned is the whole call
(logs-only telemetry), read by the detectors as it arrives.  One without a result completes
the tool span of the same call when the session closes (its spans may carry no arguments:
content off for traces, on for logs); with no such span, as for a call the harness refused
before it ran (parameter validation, policy), it is a call of its own.

A harness may also log a tool call's permission check inside its tool span
(``log_facts.PERMISSION_CHECK``): what the call asked for, and whether a rule refused it.  Such a
record completes the tool span it was logged under (its span's ancestors, as far as the
session knows them), else the one tool span of its trace and tool whose time holds it; where
two such spans overlap it completes neither (which call it was is unknown).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from collector.detect.facts import logs as log_facts
from collector.otlp.views import Attributes, LogView
from evaluators.evidence import ToolCall


@dataclass(frozen=True, slots=True)
class LoggedCall:
    call: ToolCall  # anchored to the log record's span (trace and span ids) and time
    succeeded: bool
    inside: bool = False  # logged within its tool span: placed by ancestry or time, not by order

    @property
    def whole(self) -> bool:
        """The record holds the tool's result: it is the call, not a part of a span's."""
        return self.call.result is not None


def logged_call(view: LogView, event: str, time_unix_nano: int) -> LoggedCall | None:
    """The tool call a log record of ``event`` reports, or None if it reports none.  The call
    failed unless the record says it succeeded; its error is the harness's words for it, else
    what the tool returned."""
    fields = log_facts.LOG_TOOL_CALLS.get(event)
    if fields is None:
        return None
    attrs = view.attrs
    name = attrs.text(fields.name)
    if not name:
        return None
    succeeded = str(attrs.get(fields.success)).lower() == "true"
    result = _text(attrs, fields.result)
    error = None
    if not succeeded:
        error = _text(attrs, fields.error) or result or "the harness logged the call as failed"
    record = view.record
    call = ToolCall(
        name=name,
        span_id=record.span_id.hex(),
        trace_id=record.trace_id.hex(),
        start_unix_nano=time_unix_nano,
        call_id=_text(attrs, fields.call_id),
        arguments=_text(attrs, fields.arguments) or None,
        result=result,
        error=error,
    )
    return LoggedCall(call, succeeded)


def permission_check(view: LogView, time_unix_nano: int) -> LoggedCall | None:
    """The tool call whose permission check a log record reports (``log_facts.PERMISSION_CHECK``),
    with the one argument its pattern stands for; refused when the deciding rule refused it
    (a rule that asks the user, or none recorded, leaves the outcome to the tool span).  None
    for any other record, and for a permission no tool argument matches."""
    found = view.message_fields
    fields = log_facts.PERMISSION_CHECK
    if found is None or found[0] != fields.message:
        return None
    checked = found[1]
    tool, pattern = checked.get(fields.tool), checked.get(fields.pattern)
    argument = log_facts.PERMISSION_ARGUMENTS.get(tool) if isinstance(tool, str) else None
    if argument is None or not isinstance(pattern, str) or not pattern:
        return None
    rule = checked.get(fields.rule)
    verdict = rule.get(fields.verdict) if isinstance(rule, dict) else rule
    record = view.record
    call = ToolCall(
        name=str(tool),
        span_id=record.span_id.hex(),
        trace_id=record.trace_id.hex(),
        start_unix_nano=time_unix_nano,
        arguments=json.dumps({argument: pattern}),
        error=f"denied by the harness's permission rule: {json.dumps(rule)}"
        if verdict == fields.refused
        else None,
    )
    return LoggedCall(call, succeeded=False, inside=True)


def _text(attrs: Attributes, key: str | None) -> str | None:
    return None if key is None else attrs.text(key)


def completions(
    tool_calls: list[ToolCall], logged: list[LoggedCall], ancestors: Callable[[str], list[str]]
) -> list[tuple[int | None, LoggedCall]]:
    """What each logged call changes, as (index of the tool call it completes, the call with
    what the log added): a tool span of the same tool in the same trace (each span taken once,
    in order; a permission check, the span it was logged under, ``_placed``) gets the arguments
    and error it lacks; a logged call with no such span is a call of its own (index None).  A
    logged call that adds nothing to its span is left out.  Several checks of one call (a
    command line checked command by command) are one call asking for all of them
    (``log_facts.PERMISSION_JOINERS``).
    """
    taken: set[int] = set()
    completed: dict[int, int] = {}  # tool call index -> its entry in ``found``
    found: list[tuple[int | None, LoggedCall]] = []
    for entry in logged:
        log = entry.call
        if entry.inside:
            placed = _placed(tool_calls, log, ancestors(log.span_id))
            if placed is False:
                continue  # overlapping calls of one tool: which one it checked is unknown
            index = placed
            if index is not None and index in taken:
                at = completed.get(index)
                if at is not None and tool_calls[index].arguments is None:
                    found[at] = (index, _joined(found[at][1], entry))
                continue
        else:
            index = next(
                (
                    i
                    for i, call in enumerate(tool_calls)
                    if i not in taken and call.trace_id == log.trace_id and call.name == log.name
                ),
                None,
            )
        if index is None:
            found.append((None, entry))
            continue
        taken.add(index)
        span = tool_calls[index]
        merged = replace(span, arguments=span.arguments or log.arguments, error=span.error or log.error)
        if merged != span or (span.result is None and entry.succeeded):
            completed[index] = len(found)
            found.append((index, replace(entry, call=merged)))
    return found


def _placed(tool_calls: list[ToolCall], log: ToolCall, chain: list[str]) -> int | Literal[False] | None:
    """The tool call a permission check was logged under: the one of its tool among its
    span's known ancestors (``chain``), else the one of its tool and trace whose time holds
    it; None when there is none, False when several do."""
    under = _under(tool_calls, log, chain)
    if under is not None:
        return under
    holding = [
        i
        for i, call in enumerate(tool_calls)
        if call.trace_id == log.trace_id
        and call.name == log.name
        and call.start_unix_nano <= log.start_unix_nano <= call.end_unix_nano
    ]
    return False if len(holding) > 1 else holding[0] if holding else None


def _joined(earlier: LoggedCall, later: LoggedCall) -> LoggedCall:
    """A call ``earlier`` completed, with what a later check of it asked for joined to its
    argument (for tools checked part by part) and the later check's refusal, if any."""
    joiner = log_facts.PERMISSION_JOINERS.get(earlier.call.name)
    call = earlier.call
    if joiner is not None and call.arguments is not None and later.call.arguments is not None:
        first, second = json.loads(call.arguments), json.loads(later.call.arguments)
        call = replace(
            call,
            arguments=json.dumps(
                {k: f"{v}{joiner}{second[k]}" if k in second else v for k, v in first.items()}
            ),
        )
    return replace(earlier, call=replace(call, error=call.error or later.call.error))


def _under(tool_calls: list[ToolCall], log: ToolCall, chain: list[str]) -> int | None:
    """The tool call of ``log``'s tool whose span is in ``chain`` (the log record's span and
    its known ancestors), nearest first."""
    for span_id in chain:
        for i, call in enumerate(tool_calls):
            if call.span_id == span_id and call.trace_id == log.trace_id and call.name == log.name:
                return i
    return None
