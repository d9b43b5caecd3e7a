"""Tool calls reported by log records, and how they meet the tool spans of the same calls.

A harness may log each tool call beside or instead of a tool span (``facts.LOG_TOOL_CALLS``:
which records, and their keys).  A record that holds what the tool returned is the whole call
(logs-only telemetry), read by the detectors as it arrives.  One without a result completes
the tool span of the same call when the session closes (its spans may carry no arguments:
content off for traces, on for logs); with no such span, as for a call the harness refused
before it ran (parameter validation, policy), it is a call of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collector.detect import facts
from collector.otlp.views import Attributes, LogView
from evaluators.evidence import ToolCall


@dataclass(frozen=True, slots=True)
class LoggedCall:
    call: ToolCall  # anchored to the log record's span (trace and span ids) and time
    succeeded: bool

    @property
    def whole(self) -> bool:
        """The record holds the tool's result: it is the call, not a part of a span's."""
        return self.call.result is not None


def logged_call(view: LogView, event: str, time_unix_nano: int) -> LoggedCall | None:
    """The tool call a log record of ``event`` reports, or None if it reports none.  The call
    failed unless the record says it succeeded; its error is the harness's words for it, else
    what the tool returned."""
    fields = facts.LOG_TOOL_CALLS.get(event)
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


def _text(attrs: Attributes, key: str | None) -> str | None:
    return None if key is None else attrs.text(key)


def completions(tool_calls: list[ToolCall], logged: list[LoggedCall]) -> list[tuple[int | None, LoggedCall]]:
    """What each logged call changes, as (index of the tool call it completes, the call with
    what the log added): a tool span of the same tool in the same trace (each span taken once,
    in order) gets the arguments and error it lacks; a logged call with no such span is a call
    of its own (index None).  A logged call that adds nothing to its span is left out.
    """
    taken: set[int] = set()
    found: list[tuple[int | None, LoggedCall]] = []
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
            found.append((None, entry))
            continue
        taken.add(index)
        span = tool_calls[index]
        merged = replace(span, arguments=span.arguments or log.arguments, error=span.error or log.error)
        if merged != span or (span.result is None and entry.succeeded):
            found.append((index, replace(entry, call=merged)))
    return found
