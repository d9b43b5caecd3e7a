"""Signal: user requests, final answers and prompt text, wherever a convention keeps them."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.detect.content import (
    first_present,
    first_truthy,
    flatten_text,
    is_redacted,
    is_redacted_encoded,
    parse_json,
)
from collector.detect.facts import logs as log_facts
from collector.detect.facts import prompts as prompt_facts
from collector.detect.plans import Field, SpanPlan, plan_of
from collector.detect.transcript import MessageCall, MessageResult
from collector.otlp.shapes import kept
from collector.otlp.views import (
    Attributes,
    Encoded,
    SpanView,
    as_text,
    attribute_map,
    encoded_of,
    value_of,
)
from evaluators.bytecache import memo_by_text


def _index(fields: tuple[tuple[str, str, str], ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    events: dict[str, list[tuple[str, str]]] = {}
    for event_name, key, role in fields:
        if event_name:
            events.setdefault(event_name, []).append((key, role))
    return {name: tuple(sorted(keys, key=lambda kr: kr[0])) for name, keys in events.items()}


_PROMPT_EVENTS = _index(prompt_facts.PROMPT_FIELDS)
_RESPONSE_EVENTS = _index(tuple((event, key, "") for event, key in prompt_facts.RESPONSE_FIELDS))
# Per span event name, what ``span_fields`` reads in it: the prompt table's (key, role) pairs
# and the answer table's keys, each in key order, and every key either reads.
_EVENT_READS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    name: (_PROMPT_EVENTS.get(name, ()), tuple(key for key, _ in _RESPONSE_EVENTS.get(name, ())))
    for name in (*_PROMPT_EVENTS, *_RESPONSE_EVENTS)
}
_PREAMBLE = prompt_facts.USER_TEXT_PREAMBLE
_ENCODED_ROLES = frozenset({"messages"})  # see ``prompt_fields``
INPUT = "input"  # the role of an ``input_texts`` text: read for requests as a history is


def _fields(
    view: SpanView, attributes: tuple[Field, ...], events: dict[str, tuple[tuple[str, str], ...]]
) -> list[tuple[str, Attributes, str]]:
    """(role, attributes, key) of the listed span attributes present (a ``SpanPlan``'s), then of
    the listed event attributes (events in span order; within an event, its listed keys in key
    order)."""
    found: list[tuple[str, Attributes, str]] = []
    attrs = view.attrs
    for role, key, mime in attributes:
        if mime is not None and attrs.get(mime) == prompt_facts.PLAIN_TEXT_MIME:
            role = "user"
        found.append((role, attrs, key))
    if not events:
        return found
    for event in view.events:
        wanted = events.get(event.name)
        if wanted is None:
            continue
        for key, role in wanted:
            if key in event.attrs:
                found.append((role, event.attrs, key))
    return found


def _field_texts(
    view: SpanView, attributes: tuple[Field, ...], events: dict[str, tuple[tuple[str, str], ...]]
) -> list[tuple[str, str]]:
    """(role, text) of each of ``_fields`` that holds text (not a placeholder for it)."""
    found: list[tuple[str, str]] = []
    for role, attrs, key in _fields(view, attributes, events):
        text = _readable(attrs, key)
        if text is not None:
            found.append((role, text))
    return found


def _readable(attrs: Attributes, key: str) -> str | None:
    """The text under ``key``, unless it is empty or a placeholder for text."""
    text = attrs.text(key)
    return text if text and not is_redacted(text) else None


def encoded_text(attrs: Attributes, key: str) -> Encoded | None:
    """The text under ``key`` as UTF-8 bytes (a value that is no string: as its JSON text)."""
    raw = attrs.encoded(key)
    if raw is None and key in attrs:  # a value that is no string
        text = attrs.text(key)
        raw = Encoded.of(text) if text is not None else None
    return raw


def _encoded(attrs: Attributes, key: str) -> Encoded | None:
    """``encoded_text``, unless it is empty or a placeholder for text."""
    raw = encoded_text(attrs, key)
    return raw if raw and not is_redacted_encoded(raw) else None


def prompt_fields(view: SpanView, plan: SpanPlan | None = None) -> list[tuple[str, str | Encoded]]:
    """(role, raw text) of every prompt-like field on the span, and of the conversation it
    recorded as its output (role "output": read for injected skill bodies, no turn).  A
    message history (role "messages") comes as its UTF-8 bytes (``Encoded``): it repeats the
    conversation so far, and its reader decodes only what it has not read.  ``plan``: the
    span's (``plans.plan_of``), when the caller has it."""
    return span_fields(view, plan or plan_of(view.attrs), named_events(view.span))[0]


def named_events(span: Span) -> list[tuple[str, Span.Event]]:
    """(name, event) of the span's events, in span order (each name read once).  A span
    without events gets one shared empty list: never add to what this returns."""
    events = span.events[:]  # a slice: see ``collector.otlp.views``; the field is read once
    return [(event.name, event) for event in events] if events else _NO_EVENTS


_NO_EVENTS: list[tuple[str, Span.Event]] = []  # ``named_events`` of a span without events


def span_fields(
    view: SpanView, plan: SpanPlan, events: list[tuple[str, Span.Event]]
) -> tuple[list[tuple[str, str | Encoded]], str | None]:
    """(``prompt_fields``, ``response_raw``) of the span, reading each of its events once:
    ``events``, its ``named_events``.  An event is read only when its name is in a prompt or
    answer table, and then only the keys those tables list (looked up in its attribute map);
    no view is made of it."""
    found: list[tuple[str, str | Encoded]] = []
    attrs = view.attrs
    for role, key, mime in plan.prompts:  # as ``_fields`` lists them, without a list between
        if mime is not None and attrs.get(mime) == prompt_facts.PLAIN_TEXT_MIME:
            role = "user"
        if role in _ENCODED_ROLES:  # ``_encoded``, inline; else ``_readable``, inline
            raw = attrs.encoded(key)
            if raw is None:
                raw = _encoded(attrs, key)  # a value that is no string: its JSON text
            elif raw.end == raw.start or is_redacted_encoded(raw):
                continue
            if raw is not None:
                found.append((role, raw))
            continue
        text = attrs.text(key)
        if text and not is_redacted(text):
            found.append((role, text))
    answer: str | None = None
    for _, key, _ in plan.responses:  # the first of ``_fields`` with text
        answer = attrs.text(key)
        if answer and not is_redacted(answer):
            break
        answer = None
    for name, event in events:
        reads = _EVENT_READS.get(name)
        if reads is None:
            continue
        prompt_keys, answer_keys = reads
        values = attribute_map(event)
        read: dict[str, str | None] = {}  # text read for a prompt, read again for the answer
        for key, role in prompt_keys:
            if key not in values:
                continue
            value = values[key]
            if role in _ENCODED_ROLES:
                raw = _encoded_value(value)
                if raw is not None:
                    found.append((role, raw))
            else:
                text = read[key] = _readable_value(value)
                if text is not None:
                    found.append((role, text))
        if answer is None:
            for key in answer_keys:
                if key in values:
                    answer = read[key] if key in read else _readable_value(values[key])
                    if answer is not None:
                        break
    for key in plan.flattened_texts:
        flattened = _readable(attrs, key)
        if flattened is not None:
            found.append(("flattened", flattened))
    for key in plan.outputs:
        output = _readable(attrs, key)
        if output is not None:
            found.append(("output", output))
    return found, answer


def _readable_value(value: AnyValue) -> str | None:
    """``_readable`` of one attribute's value (``Attributes.text``'s reading of it)."""
    text = value.string_value or value_of(value)
    if type(text) is not str:
        text = as_text(text)
    return text if text and not is_redacted(text) else None


def _encoded_value(value: AnyValue) -> Encoded | None:
    """``_encoded`` of one attribute's value (``encoded_text``'s reading of it)."""
    raw = encoded_of(value)
    if raw is None:  # a value that is no string: its JSON text
        text = value.string_value or value_of(value)
        text = text if type(text) is str or text is None else as_text(text)
        raw = Encoded.of(text) if text is not None else None
    return raw if raw is not None and raw.end > raw.start and not is_redacted_encoded(raw) else None


def prompt_texts(view: SpanView) -> list[tuple[str, str]]:
    """``prompt_fields``, every one as text."""
    return [(role, raw if isinstance(raw, str) else raw.text()) for role, raw in prompt_fields(view)]


def other_prompt_texts(attrs: Attributes, plan: SpanPlan | None = None) -> list[Encoded]:
    """The text, as UTF-8 bytes, of the string attributes no table names whose key says they
    may hold a prompt (a system instruction, a request, a history so far): what a harness
    without a row records."""
    found: list[Encoded] = []
    for key in (plan or plan_of(attrs)).others:
        # Most such keys hold a name or a count (``gen_ai.system``, ``*.prompt_tokens``): the
        # value is read as it is (a count holds no text), which costs less than its bytes, and
        # text of at least PROMPT_MIN_CHARS characters is then encoded.
        value = attrs.get(key)
        if type(value) is str and len(value) >= prompt_facts.PROMPT_MIN_CHARS:
            found.append(Encoded.of(value))
    return found


def input_texts(attrs: Attributes, plan: SpanPlan | None = None) -> list[Encoded]:
    """The text, as UTF-8 bytes, of the string attributes no table names whose key says they
    hold an operation's input in a harness's own namespace (``prompt_facts.INPUT_KEY_ENDINGS``)."""
    found: list[Encoded] = []
    for key in (plan or plan_of(attrs)).inputs:
        raw = attrs.encoded(key)
        if raw is not None and len(raw) >= prompt_facts.PROMPT_MIN_CHARS:
            found.append(raw)
    return found


def tool_definitions(view: SpanView, plan: SpanPlan | None = None) -> list[tuple[str, str]]:
    """("tools", text) of the span's tool definitions (``prompt_facts.TOOL_DEFINITION_KEYS``), a
    list of definitions as its JSON text."""
    fields = (plan or plan_of(view.attrs)).tool_definitions
    return _field_texts(view, fields, {}) if fields else []


def user_texts(
    view: SpanView,
    prompts: list[tuple[str, str]] | None = None,
    flattened: bool = True,
    plan: SpanPlan | None = None,
) -> list[str]:
    """Every user request the span's recorded input holds, oldest first (histories repeat),
    without a harness's preamble (``prompt_facts.USER_TEXT_PREAMBLE``).  ``prompts``: the span's
    ``prompt_texts``, when the caller has them already."""
    if plan is None:
        plan = plan_of(view.attrs)
    found: list[str] = []
    for role, raw in _field_texts(view, plan.prompts, _PROMPT_EVENTS) if prompts is None else prompts:
        if role == "user":
            parsed = parse_json(raw)
            text = _text_only(parsed if parsed is not None else raw)
            request = _request(text) if text else ""
            if request:
                found.append(request)
        elif role == "messages":
            found += _history_requests(raw)
        elif role == INPUT:
            found += _input_requests(raw)
    if flattened and plan.flattened:
        found += _requests(_flattened_user_texts(view, plan.flattened))
    return found


def _requests(texts: list[str]) -> list[str]:
    return [request for text in texts if text and (request := _request(text))]


def _user_messages(raw: str, unwrap: bool) -> list[str]:
    return _requests(
        [
            _text_only(first_present(m, prompt_facts.MESSAGE_BODY_KEYS))
            for m in _messages(raw, unwrap=unwrap)
            if m.get("role") in prompt_facts.USER_ROLES
        ]
    )


# The requests of a history (or an input) depend on its text alone, and the same text comes
# back in every session of an agent (its first turn): each is read once.  Shared; not modified.
@memo_by_text("history_requests", 8 * 1024 * 1024, value_factor=0.5)
def _history_requests(raw: str) -> list[str]:
    return _user_messages(raw, unwrap=False)


@memo_by_text("input_requests", 4 * 1024 * 1024, value_factor=0.5)
def _input_requests(raw: str) -> list[str]:
    return _user_messages(raw, unwrap=True)


def message_text(content: Any) -> str:
    """The text a message's content holds (its text parts, a harness's preamble left out)."""
    return _request(_text_only(content))


def _request(text: str) -> str:
    return _PREAMBLE.sub("", text, count=1).strip()


def _text_only(value: Any) -> str:
    """The text parts of a message body, leaving out tool calls and tool results."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if value.get("type") not in prompt_facts.TEXT_PART_TYPES or _has_key(
            value, prompt_facts.TOOL_PART_KEYS
        ):
            return ""
        text = first_present(value, prompt_facts.TEXT_PART_KEYS)
        return text if isinstance(text, str) else ""
    if isinstance(value, list):
        return "\n".join(t for t in (_text_only(v) for v in value) if t)
    return ""


def _flattened_user_texts(view: SpanView, keys: tuple[str, ...]) -> list[str]:
    roles: dict[str, str] = {}
    texts: dict[str, list[str]] = {}
    for key in keys:
        index = key[len(prompt_facts.FLATTENED_PREFIX) :].split(".", 1)[0]
        if key.endswith(prompt_facts.FLATTENED_ROLE_SUFFIX):
            roles[index] = view.attrs.text(key) or ""
        elif key.endswith(prompt_facts.FLATTENED_SUFFIXES):
            texts.setdefault(index, []).append(view.attrs.text(key) or "")
    return [
        "\n".join(texts.get(i, []))
        for i in sorted(roles, key=lambda i: int(i) if i.isdigit() else 0)
        if roles[i] in prompt_facts.USER_ROLES
    ]


# Per key shape, its flattened tool calls and results (``_block_plan``): for each, whether it
# is a result, and (field, key) pairs: a call's "id", "name", "arguments"; a result's "id",
# "role" and each "content" part.
_Step = tuple[bool, tuple[tuple[str, str], ...]]
_BLOCK_PLANS: dict[tuple[str, ...], tuple[_Step, ...]] = {}


def _block_plan(view: SpanView, every: tuple[str, ...]) -> tuple[_Step, ...]:
    """Where the span's flattened tool calls and results are (``every``: its flattened keys),
    in message order: worked out once per key shape."""
    shape = view.attrs.shape()
    plan = _BLOCK_PLANS.get(shape)
    if plan is not None:
        return plan
    steps: list[tuple[bool, list[tuple[str, str]]]] = []
    calls: dict[str, list[tuple[str, str]]] = {}  # "<message>.tool_calls.<j>" -> its pairs
    for key in every:
        if key.endswith(prompt_facts.FLATTENED_RESULT_ID_SUFFIX):
            message = key.removesuffix(prompt_facts.FLATTENED_RESULT_ID_SUFFIX)
            parts = [
                k
                for k in every
                if k.startswith(message + ".") and k.endswith(prompt_facts.FLATTENED_SUFFIXES)
            ]
            steps.append(
                (
                    True,
                    [("id", key), ("role", message + prompt_facts.FLATTENED_ROLE_SUFFIX)]
                    + [("content", k) for k in parts],
                )
            )
        elif prompt_facts.FLATTENED_TOOL_CALLS in key:
            head, _, rest = key.partition(prompt_facts.FLATTENED_TOOL_CALLS)
            position, _, field = rest.partition(".")
            if field in prompt_facts.FLATTENED_CALL_FIELDS:
                pairs = calls.get(f"{head}.{position}")
                if pairs is None:
                    pairs = calls[f"{head}.{position}"] = []
                    steps.append((False, pairs))
                pairs.append((prompt_facts.FLATTENED_CALL_FIELDS[field], key))
    plan = tuple((is_result, tuple(pairs)) for is_result, pairs in steps)
    if kept(shape):
        _BLOCK_PLANS[shape] = plan
    return plan


def flattened_blocks(view: SpanView, plan: SpanPlan | None = None) -> list[MessageCall | MessageResult]:
    """The tool calls and tool results of the span's flattened input messages, in message
    order (``prompt_facts.FLATTENED_TOOL_CALLS``; a result is a message of role "tool" with a
    tool_call_id): what a history holds as blocks, for a convention that flattens it."""
    every = (plan or plan_of(view.attrs)).flattened
    if not every:  # most spans: no flattened messages
        return []
    found: list[MessageCall | MessageResult] = []
    for is_result, pairs in _block_plan(view, every):
        values: dict[str, str] = {}
        contents: list[str] = []
        for field, key in pairs:
            text = view.attrs.text(key) or ""
            if field == "content":
                contents.append(text)
            else:
                values[field] = text
        if not is_result:
            arguments = values.get("arguments")
            found.append(
                MessageCall(values.get("id", ""), values.get("name", ""), parse_json(arguments) or arguments)
            )
        elif values.get("role") == prompt_facts.FLATTENED_RESULT_ROLE:
            text = "\n".join(contents)
            found.append(MessageResult(values.get("id", ""), text, None, "", text))
    return found


def response_raw(view: SpanView, plan: SpanPlan | None = None) -> str | None:
    """The raw text of the span's recorded answer (``answer_text`` reads it)."""
    return span_fields(view, plan or plan_of(view.attrs), named_events(view.span))[1]


def answer_text(raw: str) -> str | None:
    """The readable answer in a recorded response: the last message of a list, or the text
    (None for what is no answer, ``log_facts.PLACEHOLDER_ANSWERS``)."""
    if raw in log_facts.PLACEHOLDER_ANSWERS:
        return None
    parsed = parse_json(raw)
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict) and "role" in parsed[0]:
        return flatten_text(first_truthy(parsed[-1], prompt_facts.MESSAGE_BODY_KEYS)) or None
    return (flatten_text(parsed) if parsed is not None else raw) or None


def _messages(raw: str, unwrap: bool = False) -> list[dict[str, Any]]:
    """The messages of a recorded history; with ``unwrap``, also one held under a single
    component's name (``{"agent": {"messages": [...]}}``)."""
    parsed = parse_json(raw)
    if unwrap and isinstance(parsed, dict) and len(parsed) == 1:
        (inner,) = parsed.values()
        if isinstance(inner, dict) and not _has_key(parsed, prompt_facts.HISTORY_KEYS):
            parsed = inner
    if isinstance(parsed, dict):
        parsed = first_truthy(parsed, prompt_facts.HISTORY_KEYS)
    if isinstance(parsed, list):
        return [m for m in parsed if isinstance(m, dict)]
    return []


def _has_key(d: dict[str, Any], keys: tuple[str, ...]) -> bool:
    for key in keys:  # noqa: SIM110 - a loop makes no generator per call
        if key in d:
            return True
    return False
