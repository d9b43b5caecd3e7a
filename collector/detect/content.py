"""Where each convention keeps a tool call's name, arguments and result.

``tool_call`` reads a span through the key tables of ``facts`` and returns the call as
evidence; the skill detectors then only look at evidence, never at conventions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import orjson
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from collector.detect.facts import logs as log_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.detect.facts import values as value_facts
from collector.otlp.views import Attributes, Encoded, SpanView
from evaluators.bytecache import ByteCache, memo_by_text, register, text_bytes
from evaluators.evidence import ToolCall


def has_marker(view: SpanView, markers: tuple[tuple[str, str | None], ...]) -> bool:
    """Whether the span has one of the marker keys (with the value given, if any)."""
    attrs = view.attrs
    present = attrs.keys()
    for key, expected in markers:  # a loop, not any(): no generator made for every span
        if key in present and (expected is None or attrs.text(key) == expected):
            return True
    return False


def marked(attrs: Attributes, markers: tuple[tuple[str, str | None], ...]) -> bool:
    """``has_marker`` for markers whose keys the span holds (a ``plans.SpanPlan``'s): no test
    of presence."""
    for key, expected in markers:  # noqa: SIM110 - a loop, not any(): no generator made for every span
        if expected is None or attrs.text(key) == expected:
            return True
    return False


def event_text(view: SpanView, events: tuple[tuple[str, str], ...]) -> str | None:
    """The first event holding one of ``events``; within it, the field listed first."""
    for event in view.events:
        for name, key in events:
            if name == event.name and key in event.attrs:
                return event.attrs.text(key)
    return None


@dataclass(frozen=True, slots=True)
class ShapedToolKeys:
    """Where a span that no table marker calls a tool span keeps a tool call, by its keys'
    shape (``tool_span_facts.SHAPED_*``): the name's key (or, None, the span kind's key: the span's
    name is the tool's), and the arguments', result's, error flag's, description's and call
    id's keys where present."""

    name: str | None
    kind: str | None
    arguments: str | None
    result: str | None
    error: str | None
    description: str | None
    call_id: str | None


def shaped_tool_keys(shape: tuple[str, ...]) -> ShapedToolKeys | None:
    """The tool-call keys a span of this key shape holds, or None: worked out once a shape
    (kept in a cache sized in bytes, as every cache is)."""
    found = _shaped_tool_keys.get(shape, _UNSEEN)
    if found is _UNSEEN:
        found = _tool_keys_of(tuple(sorted(shape)))  # the map's order varies between processes
        _shaped_tool_keys.put(shape, found, sum(text_bytes(key) for key in shape))
    return found  # type: ignore[return-value]


_UNSEEN = object()
_shaped_tool_keys: ByteCache[tuple[str, ...], ShapedToolKeys | None] = register(
    ByteCache("shaped_tool_keys", 1024 * 1024)
)


def _tool_keys_of(shape: tuple[str, ...]) -> ShapedToolKeys | None:
    name = next((key for key in shape if key.endswith(tool_span_facts.SHAPED_TOOL_NAME_SUFFIX)), None)
    kind = next((key for key in shape if key.endswith(tool_span_facts.SHAPED_SPAN_KIND_SUFFIXES)), None)
    if name is None and kind is None:
        return None
    return ShapedToolKeys(
        name,
        kind,
        next((key for key in shape if key.endswith(tool_span_facts.SHAPED_ARGUMENT_SUFFIXES)), None),
        next((key for key in shape if key.endswith(tool_span_facts.SHAPED_RESULT_SUFFIXES)), None),
        next((key for key in shape if key.endswith(tool_span_facts.SHAPED_ERROR_SUFFIX)), None),
        next((key for key in shape if key.endswith(tool_span_facts.SHAPED_DESCRIPTION_SUFFIX)), None),
        next((key for key in shape if key.endswith(tool_span_facts.SHAPED_CALL_ID_SUFFIX)), None),
    )


def tool_description(view: SpanView, shaped: object = _UNSEEN) -> str | None:
    """The description of the tool a tool span calls, where the span records it.  ``shaped``:
    the span's ``shaped_tool_keys`` (``plans.SpanPlan.shaped_tool``), when the caller has them."""
    attrs = view.attrs
    found = attrs.first_text(tool_span_facts.TOOL_DESCRIPTION_KEYS)
    if found is None:
        if shaped is _UNSEEN:
            shaped = shaped_tool_keys(attrs.shape())
        if isinstance(shaped, ShapedToolKeys) and shaped.description:
            found = attrs.text(shaped.description)
    return found


def tool_call(
    view: SpanView,
    markers: tuple[tuple[str, str | None], ...] = tool_span_facts.TOOL_SPAN_MARKERS,
    shaped: object = _UNSEEN,
    marked: bool = False,
) -> ToolCall | None:
    """The tool call a span records, or None if it is not a tool span: by a table marker,
    else by the shape of its keys (``shaped_tool_keys``).  ``markers`` and ``shaped``: what
    the span's key shape holds of them (``plans.SpanPlan``), when the caller knows it;
    ``marked``: the shape holds a marker that needs no value (``SpanPlan.tool_marked``)."""
    if not (marked or has_marker(view, markers)):
        if shaped is _UNSEEN:
            shaped = shaped_tool_keys(view.attrs.shape())
        return shaped_call(view, shaped) if isinstance(shaped, ShapedToolKeys) else None
    attrs = view.attrs
    present = attrs.keys()  # ``key in present``: one lookup, no call
    if _any_present(present, tool_span_facts.HOOK_SPAN_KEYS):
        return None
    span = view.span
    name = attrs.first_text(tool_span_facts.TOOL_NAME_KEYS)
    if not name:
        span_name = span.name
        if span_name.startswith(tool_span_facts.TOOL_SPAN_NAME_PREFIX):
            name = span_name[len(tool_span_facts.TOOL_SPAN_NAME_PREFIX) :].split(" ", 1)[0]
        if not name:
            return None
    arguments = attrs.first_text(tool_span_facts.TOOL_ARGUMENT_KEYS)
    if arguments is None:
        arguments = event_text(view, tool_span_facts.TOOL_ARGUMENT_EVENTS) if span.events else None
    if arguments is None:
        arguments = _argument_attributes(attrs, present)
    result = attrs.first_text(tool_span_facts.TOOL_RESULT_KEYS)
    if result is None and span.events:
        result = event_text(view, tool_span_facts.TOOL_RESULT_EVENTS)
    if arguments == result == value_facts.UNRECORDED_CALL:
        arguments = result = None
    if arguments is not None and is_redacted(arguments):
        arguments = None
    if result is not None and is_redacted(result):
        result = None
    status = span.status
    code = status.code
    skill_attribute = (
        None
        if _any_present(present, skill_tool_facts.SKILL_RESOURCE_ATTRIBUTES)
        else attrs.first_text(skill_tool_facts.SKILL_NAME_ATTRIBUTES)
    )
    return ToolCall(  # by position: a class called with keywords makes a dict of them
        name,
        view.span_id,
        view.trace_id,
        span.start_time_unix_nano,
        attrs.first_text(tool_span_facts.TOOL_CALL_ID_KEYS),
        arguments,
        result,
        _error_of(attrs, present, status, code),
        skill_attribute,
        _any_present(present, skill_tool_facts.SKILL_RESOLVED_ATTRIBUTES),
        code == _STATUS_OK and span.name in tool_span_facts.STATUS_OUTCOME_TOOL_SPANS,
        span.end_time_unix_nano,
    )


def shaped_call(view: SpanView, keys: ShapedToolKeys) -> ToolCall | None:
    """The tool call a span no table marker marks records by its keys' shape (``keys``: its
    ``shaped_tool_keys``), or None: what ``tool_call`` reads of such a span."""
    attrs = view.attrs
    if keys.name is not None:
        name = attrs.text(keys.name)
    elif keys.kind is not None and (attrs.text(keys.kind) or "").upper() == tool_span_facts.SHAPED_TOOL_KIND:
        name = view.name
    else:
        return None
    if not name:
        return None
    arguments = attrs.text(keys.arguments) if keys.arguments else None
    result = attrs.text(keys.result) if keys.result else None
    if arguments is not None and is_redacted(arguments):
        arguments = None
    if result is not None and is_redacted(result):
        result = None
    span = view.span
    status = span.status
    error = _error_of(attrs, attrs.keys(), status, status.code)
    if error is None and keys.error and str(attrs.get(keys.error)).lower() == "true":
        error = _error_text(result) or "tool error"
        result = None
    return ToolCall(  # by position: a class called with keywords makes a dict of them
        name,
        view.span_id,
        view.trace_id,
        span.start_time_unix_nano,
        attrs.first_text(tool_span_facts.TOOL_CALL_ID_KEYS)
        or (attrs.text(keys.call_id) if keys.call_id else None),
        arguments,
        result,
        error,
        None,
        False,
        False,
        span.end_time_unix_nano,
    )


_REDACTED_CHARS = max(len(value) for value in log_facts.REDACTED_VALUES)
_STATUS_ERROR, _STATUS_OK = Status.STATUS_CODE_ERROR, Status.STATUS_CODE_OK


def is_redacted(text: str) -> bool:
    """Whether ``text`` is what a harness writes in place of content (``log_facts.REDACTED_VALUES``).
    Its length is looked at first: a set lookup would hash a whole history, on every span."""
    return len(text) <= _REDACTED_CHARS and text in log_facts.REDACTED_VALUES


_REDACTED_BYTES = frozenset(value.encode() for value in log_facts.REDACTED_VALUES)
_REDACTED_BYTES_LONGEST = max(len(value) for value in _REDACTED_BYTES)


def is_redacted_encoded(raw: Encoded) -> bool:
    """``is_redacted`` for text as its UTF-8 bytes: the same answer, nothing decoded."""
    size = raw.end - raw.start  # ``len``, without a call
    return size <= _REDACTED_BYTES_LONGEST and raw.piece(0, size) in _REDACTED_BYTES


def _any_present(present: Collection[str], keys: tuple[str, ...]) -> bool:
    """Whether any of ``keys`` is in ``present`` (a span's keys)."""
    for key in keys:  # noqa: SIM110 - a loop makes no generator per call
        if key in present:
            return True
    return False


def _argument_attributes(attrs: Attributes, present: Collection[str]) -> str | None:
    found = {arg: attrs.text(key) for key, arg in tool_span_facts.ARGUMENT_ATTRIBUTES if key in present}
    return json.dumps(found) if found else None


def _error_of(attrs: Attributes, present: Collection[str], status: Status, code: int) -> str | None:
    """A tool span's error: its status's message when its status is ERROR, else the error type
    or a tool status that is no success (``present``: ``attrs``' keys; ``code``: the status's)."""
    if code == _STATUS_ERROR:
        return status.message or attrs.text(tool_span_facts.ERROR_TYPE_KEY) or "span status ERROR"
    if tool_span_facts.ERROR_TYPE_KEY in present:
        return attrs.text(tool_span_facts.ERROR_TYPE_KEY)
    found = attrs.first_text(tool_span_facts.TOOL_STATUS_KEYS)
    if found is not None and found.lower() not in tool_span_facts.TOOL_SUCCESS_VALUES:
        return f"tool status {found}"
    return None


def parse_json(text: str | None) -> Any:
    """JSON if the text is JSON, else None (a bare string argument stays a string).

    Several detectors read the same text of a span (a history is read for user turns and for
    tool blocks, a result for its outcome and its body), so recent results are kept: the
    value returned may be shared and must not be modified.
    """
    if not text or text[0] not in '{["':
        return None
    return _loads(text)


MAX_JSON_DEPTH = 1024  # orjson's own nesting limit, counted by orjson: no stack involved
# The bound for text only json reads (NaN, Infinity, lone surrogates): json's decoder recurses,
# so its bound would be the process's recursion limit less the caller's stack; this one is far
# below Python's default limit, so such text reads the same from every caller and process.
FALLBACK_JSON_DEPTH = 200
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


class TooDeep(RecursionError):
    """JSON text nested deeper than its bound: unreadable at any recursion limit and any
    stack depth of the caller (counted as ``too_deep``, as a RecursionError is)."""


@memo_by_text("json", 32 * 1024 * 1024, value_factor=4.0)  # a parsed value: ~4x its text
def _loads(text: str) -> Any:
    """The value of ``text``, None when it is not JSON; raises ``TooDeep`` for text nested
    deeper than ``MAX_JSON_DEPTH`` (``FALLBACK_JSON_DEPTH`` for text that only json reads),
    the same in every process and from every caller."""
    try:
        # ~2x json's speed on recorded histories; the same values, except that an integer over
        # 64 bits reads as the nearest float (detectors read strings and blocks, not numbers).
        return orjson.loads(text)
    except orjson.JSONDecodeError as err:
        if "depth limit" in str(err):
            raise TooDeep(f"JSON text nested deeper than {MAX_JSON_DEPTH}") from None
    if _nesting(text) > FALLBACK_JSON_DEPTH:
        raise TooDeep(f"JSON text that only json reads, nested deeper than {FALLBACK_JSON_DEPTH}")
    try:  # what orjson refuses and json reads: NaN, Infinity, lone surrogates
        return json.loads(text)
    except ValueError:
        return None


def _nesting(text: str) -> int:
    """How deep the brackets of ``text`` nest outside its strings (without recursion)."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        if bracket.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def arguments_of(call: ToolCall) -> dict[str, Any] | str | None:
    """A call's arguments as a dict, or the bare string a single-argument tool recorded."""
    parsed = parse_json(call.arguments)
    if isinstance(parsed, str):  # JSON text inside a JSON string: '"{\\"name\\": ...}"'
        parsed = parse_json(parsed.strip()) or parsed
    if isinstance(parsed, dict):
        inner = first_truthy(parsed, value_facts.ARGUMENT_WRAPPERS)
        return inner if isinstance(inner, dict) else parsed
    if isinstance(parsed, str):
        return parsed
    return call.arguments


def flatten_text(value: Any) -> str:
    """The human-readable text of a recorded message or result."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (flatten_text(v) for v in value) if t)
    if isinstance(value, dict):
        for key in value_facts.TEXT_FIELDS:
            if key in value:
                return flatten_text(value[key])
        return ""
    return str(value)


def result_text(call: ToolCall) -> str:
    parsed = parse_json(call.result)
    return flatten_text(parsed) if parsed is not None else (call.result or "")


def _error_text(result: str | None) -> str:
    """A failed call's recorded result as its error: ``{"error": "..."}``'s text, or the text."""
    parsed = parse_json(result)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return str(parsed["error"])
    return result or ""


def first_present(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of ``keys`` that ``d`` has (None if it has none)."""
    for key in keys:
        if key in d:
            return d[key]
    return None


def first_truthy(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The first truthy value of ``keys`` in ``d``, else the last key's value (``a or b``)."""
    value = None
    for key in keys:
        value = d.get(key)
        if value:
            break
    return value
