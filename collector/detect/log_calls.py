"""Tool calls reported by log records, and how they meet the tool spans of the same calls.

A harness may log each tool call (name, arguments, success, error) beside or instead of a
tool span: its spans may carry no arguments (content off for traces, on for logs), and a
call refused before it ran (parameter validation, policy) has no tool span at all.  Which
log records report calls, and their keys, are in ``facts.LOG_TOOL_CALLS``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collector.detect import facts
from collector.otlp.views import LogView
from evaluators.evidence import ToolCall


@dataclass(frozen=True, slots=True)
class LoggedCall:
    call: ToolCall  # anchored to the log record's span (trace and span ids) and time
    succeeded: bool


@dataclass(frozen=True, slots=True)
class Completion:
    """A logged call's part in the session: ``index`` is the tool call it completes (None:
    the call has no tool span), ``call`` the call with what the log added."""

    index: int | None
    call: ToolCall
    succeeded: bool


def logged_call(view: LogView, span_id: str, trace_id: str, time_unix_nano: int) -> LoggedCall | None:
    """The tool call this log record reports, or None if it reports none."""
    fields = facts.LOG_TOOL_CALLS.get(view.event_name)
    if fields is None:
        return None
    attrs = view.attrs
    name = attrs.text(fields.name)
    if not name:
        return None
    succeeded = str(attrs.get(fields.success)).lower() == "true"
    error = None if succeeded else (attrs.text(fields.error) or "the harness logged the call as failed")
    call = ToolCall(
        name=name,
        span_id=span_id,
        trace_id=trace_id,
        start_unix_nano=time_unix_nano,
        arguments=attrs.text(fields.arguments) or None,
        error=error,
    )
    return LoggedCall(call, succeeded)


def completions(tool_calls: list[ToolCall], logged: list[LoggedCall]) -> list[Completion]:
    """What each logged call changes: a tool span of the same tool in the same trace (each
    span taken once, in order) gets the arguments and error it lacks; a logged call with no
    such span is a call of its own.  A logged call that adds nothing to its span is left out.
    """
    taken: set[int] = set()
    found: list[Completion] = []
    for entry in logged:
        log = entry.call
        index = next(
            (
                i
                for i, call in enumerate(tool_calls)
                if i not in taken and call.trace_id == log.trace_id and call.name == log.name
            ),
            None,
        )
        if index is None:
            found.append(Completion(None, log, entry.succeeded))
            continue
        taken.add(index)
        span = tool_calls[index]
        merged = replace(span, arguments=span.arguments or log.arguments, error=span.error or log.error)
        if merged != span or (span.result is None and entry.succeeded):
            found.append(Completion(index, merged, entry.succeeded))
    return found
