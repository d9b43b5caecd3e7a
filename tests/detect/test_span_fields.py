"""``messages.span_fields`` reads a span's events without a view of each: on generated spans
(events named in the prompt and answer tables and others, keys written twice, values that
are no string, empty or a placeholder), it gives what the tables' fields hold as each
event's ``Attributes`` read them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.detect import messages, plans
from collector.detect.content import is_redacted
from collector.detect.facts import logs as log_facts
from collector.detect.facts import prompts as prompt_facts
from collector.otlp.views import Attributes, Encoded, ResourceView, SpanView

_PROMPT_EVENTS = [(event, key, role) for event, key, role in prompt_facts.PROMPT_FIELDS if event]
_ANSWER_EVENTS = [(event, key) for event, key in prompt_facts.RESPONSE_FIELDS if event]
_EVENT_NAMES = sorted({event for event, _, _ in _PROMPT_EVENTS} | {event for event, _ in _ANSWER_EVENTS})
_EVENT_KEYS = sorted({key for _, key, _ in _PROMPT_EVENTS} | {key for _, key in _ANSWER_EVENTS})
_SPAN_KEYS = sorted(
    {key for event, key, _ in prompt_facts.PROMPT_FIELDS if not event}
    | {key for event, key in prompt_facts.RESPONSE_FIELDS if not event}
)
_PLACEHOLDER = sorted(log_facts.REDACTED_VALUES)[0]
_VALUE = st.one_of(
    st.text(alphabet='ab "[]{}\u2014', max_size=40),
    st.sampled_from(["", _PLACEHOLDER, "[]", "{}"]),
    st.integers(0, 3),
    st.lists(st.integers(0, 3), max_size=2),
)
_ATTRIBUTES = st.lists(
    st.tuples(st.sampled_from([*_EVENT_KEYS, "finish_reason", "other"]), _VALUE), max_size=4
)
_EVENTS = st.lists(
    st.tuples(st.sampled_from([*_EVENT_NAMES, "gen_ai.other", "exception"]), _ATTRIBUTES), max_size=6
)


def _any(value: object) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list):
        any_value = AnyValue()
        any_value.array_value.values.extend(AnyValue(int_value=v) for v in value)
        return any_value
    return AnyValue(int_value=int(value))  # type: ignore[call-overload]


def _span(
    attributes: list[tuple[str, object]], events: list[tuple[str, list[tuple[str, object]]]]
) -> SpanView:
    span = Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="chat")
    for key, value in attributes:
        span.attributes.append(KeyValue(key=key, value=_any(value)))
    for name, pairs in events:
        event = span.events.add(name=name)
        for key, value in pairs:
            event.attributes.append(KeyValue(key=key, value=_any(value)))
    return SpanView(span, "scope", ResourceView(Resource()))


def _readable(attrs: Attributes, key: str) -> str | None:
    text = attrs.text(key)
    return text if text and not is_redacted(text) else None


def _as_read(raw: str | Encoded) -> tuple[str, str]:
    return ("text", raw) if isinstance(raw, str) else ("bytes", raw.text())


def _text(attrs: Attributes, key: str, role: str) -> tuple[str, str] | None:
    """What ``Attributes`` reads under ``key``, as a prompt of ``role`` holds it (a history's
    as its bytes), unless it is empty or a placeholder."""
    text = attrs.text(key)
    if not text or is_redacted(text):
        return None
    return ("bytes", text) if role == "messages" else ("text", text)


def _expected(view: SpanView) -> tuple[list[tuple[str, tuple[str, str]]], str | None]:
    """What the tables' fields hold, read through ``Attributes``: the span's prompt fields
    (in the plan's order), then each event's in event order (within an event, in key order);
    the first answer with text, the span's before its events'."""
    prompts: list[tuple[str, tuple[str, str]]] = []
    answers: list[tuple[str, str] | None] = []
    plan = plans.plan_of(view.attrs)
    for role, key, _ in plan.prompts:
        found = _text(view.attrs, key, role)
        if found is not None:
            prompts.append((role, found))
    answers += [_text(view.attrs, key, "") for _, key, _ in plan.responses]
    for event in view.events:
        for key, role in sorted((k, r) for e, k, r in _PROMPT_EVENTS if e == event.name):
            found = _text(event.attrs, key, role) if key in event.attrs else None
            if found is not None:
                prompts.append((role, found))
        answers += [
            _text(event.attrs, key, "")
            for key in sorted(k for e, k in _ANSWER_EVENTS if e == event.name)
            if key in event.attrs
        ]
    return prompts, next((answer[1] for answer in answers if answer is not None), None)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([*_SPAN_KEYS, "gen_ai.system"]), _VALUE),
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
    _EVENTS,
)
def test_a_spans_events_read_once_give_what_each_events_attributes_hold(
    attributes: list[tuple[str, object]], events: list[tuple[str, list[tuple[str, object]]]]
) -> None:
    view = _span(attributes, events)
    found, answer = messages.span_fields(view, plans.plan_of(view.attrs), messages.named_events(view.span))
    assert ([(role, _as_read(raw)) for role, raw in found], answer) == _expected(_span(attributes, events))


def test_a_key_written_twice_in_an_event_reads_its_last_value() -> None:
    view = _span([], [("gen_ai.user.message", [("content", "first"), ("content", "second")])])
    found, answer = messages.span_fields(view, plans.plan_of(view.attrs), messages.named_events(view.span))
    assert [(role, raw) for role, raw in found] == [("user", "second")]
    assert answer is None
