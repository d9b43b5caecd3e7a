"""Key-shape plans (``plans``) and configured session keys worked out once per key shape
(``SessionKeys.configured``), on generated spans: what each reader reads is what the tables
say a span of those keys holds, with each span's own values, whichever span of the shape
was seen first."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from support import assembled_sessions, recorded_trace_requests

from collector.detect import content, messages, plans
from collector.detect.content import is_redacted
from collector.detect.facts import prompts as prompt_facts
from collector.detect.facts import sessions as session_facts
from collector.detect.facts import tool_spans as tool_span_facts
from collector.otlp.views import Attributes, ResourceView, SpanView
from collector.sessions.keys import SessionKeys

_PROMPT_KEYS = [key for event, key, _ in prompt_facts.PROMPT_FIELDS if not event]
_RESPONSE_KEYS = [key for event, key in prompt_facts.RESPONSE_FIELDS if not event]
_FLATTENED = [
    f"{prompt_facts.FLATTENED_PREFIX}{i}{suffix}"
    for i in (0, 1, 2, 10, 11)
    for suffix in (*prompt_facts.FLATTENED_SUFFIXES, prompt_facts.FLATTENED_ROLE_SUFFIX)
]
_OTHER = [
    "acme.system_prompt",
    "acme.agent.input",
    "acme.step.input_data",
    "gen_ai.request.model",
    "llm.model_name",
    "http.method",
    "acme.instructions",
    f"{prompt_facts.FLATTENED_OUTPUT_PREFIX}0.message.content",
    *prompt_facts.TOOL_DEFINITION_KEYS,
    *(key for key, _ in tool_span_facts.AGENT_SPAN_MARKERS),
]
KEYS = sorted({*_PROMPT_KEYS, *_RESPONSE_KEYS, *_FLATTENED, *_OTHER})
_TEXT = st.text(alphabet="abc \u2014xyz", min_size=0, max_size=80)
_VALUE = st.one_of(_TEXT, st.integers(0, 3), st.sampled_from(["text/plain", "user", "invoke_agent"]))


def _span(attributes: list[tuple[str, object]]) -> SpanView:
    span = Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="chat")
    for key, value in attributes:
        any_value = AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=int(value))  # type: ignore[call-overload]
        span.attributes.append(KeyValue(key=key, value=any_value))
    return SpanView(span, "scope", ResourceView(Resource()))


_SPANS = st.lists(st.tuples(st.sampled_from(KEYS), _VALUE), max_size=14, unique_by=lambda kv: kv[0])


def _order(key: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


@settings(max_examples=300, deadline=None)
@given(_SPANS, st.data())
def test_a_plan_lists_what_the_tables_name_and_readers_read_each_spans_own_values(
    attributes: list[tuple[str, object]], data: st.DataObject
) -> None:
    view = _span(attributes)
    keys = [key for key, _ in attributes]
    plan = plans.plan_of(view.attrs)
    assert [key for _, key, _ in plan.prompts] == [key for key in _PROMPT_KEYS if key in keys]
    assert [key for _, key, _ in plan.responses] == [key for key in _RESPONSE_KEYS if key in keys]
    flattened = sorted((k for k in keys if k.startswith(prompt_facts.FLATTENED_PREFIX)), key=_order)
    assert list(plan.flattened) == flattened
    assert plan.model == any(k.startswith(tool_span_facts.MODEL_ATTRIBUTE_PREFIXES) for k in keys)
    # Another span of the same keys, with values of its own: read with the plan kept for the
    # shape, it gives what it holds, not what the first span held.
    other = _span([(key, data.draw(_VALUE)) for key in keys])
    assert plans.plan_of(other.attrs) is plan
    texts = {key: value if isinstance(value, str) else str(value) for key, value in other_values(other, keys)}
    readable = [k for k in keys if texts[k] and not is_redacted(texts[k])]
    assert messages.response_raw(other) == next((texts[k] for k in _RESPONSE_KEYS if k in readable), None)
    prompts = [key for key in _PROMPT_KEYS if key in readable]
    flattened_texts = [k for k in flattened if k.endswith(prompt_facts.FLATTENED_SUFFIXES) and k in readable]
    expected = [texts[k] for k in prompts + flattened_texts]
    assert [raw if isinstance(raw, str) else raw.text() for _, raw in messages.prompt_fields(other)][
        : len(expected)
    ] == expected


def other_values(view: SpanView, keys: list[str]) -> list[tuple[str, object]]:
    return [(key, view.attrs.get(key)) for key in keys]


_CONFIGURED = session_facts.SESSION_KEYS
_SESSION_KEYS = sorted({key.split(":", 1)[1] for key in _CONFIGURED} | {"acme.session_id", "http.method"})
_IDS = st.one_of(st.sampled_from(["", "s-1", "s-2"]), st.integers(0, 9))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_SESSION_KEYS), _IDS), max_size=6, unique_by=lambda kv: kv[0]),
    st.lists(st.tuples(st.sampled_from(_SESSION_KEYS), _IDS), max_size=3, unique_by=lambda kv: kv[0]),
    st.data(),
)
def test_configured_keys_by_shape_find_the_first_key_in_order_that_names_a_session_by_text(
    on_span: list[tuple[str, object]], on_resource: list[tuple[str, object]], data: st.DataObject
) -> None:
    finder = SessionKeys(_CONFIGURED)
    for _ in range(2):  # the second item of the same shapes is read with the first's plan
        span_values = [(key, data.draw(_IDS)) for key, _ in on_span]
        resource_values = [(key, data.draw(_IDS)) for key, _ in on_resource]
        view = _span(span_values)
        resource = ResourceView(
            Resource(
                attributes=[
                    KeyValue(
                        key=k,
                        value=AnyValue(string_value=v) if isinstance(v, str) else AnyValue(int_value=int(v)),  # type: ignore[call-overload]
                    )
                    for k, v in resource_values
                ]
            )
        )
        found = finder.configured(view.attrs, resource.attrs)
        expected = None
        for entry in _CONFIGURED:
            where, key = entry.split(":", 1)
            value = dict(span_values if where == "span" else resource_values).get(key)
            if isinstance(value, str) and value:
                expected = (value, key)
                break
        assert (found.value, found.attribute) == expected if found is not None else expected is None


def test_every_recording_assembles_to_the_same_sessions_with_and_without_the_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = recorded_trace_requests()
    skipped = {"spans": 0}
    plan_of = plans.plan_of

    def counted(attrs: Attributes) -> plans.SpanPlan:
        plan = plan_of(attrs)
        skipped["spans"] += plan.reads_nothing
        return plan

    monkeypatch.setattr(plans, "plan_of", counted)
    with_skip = assembled_sessions(requests, raw=True)
    assert skipped["spans"] > 500  # the skip is taken (on spans without events, of those)
    monkeypatch.setattr(plans, "SKIP_EMPTY", False)
    assert assembled_sessions(requests, raw=True) == with_skip


def _kind(view: SpanView, plan: plans.SpanPlan) -> tuple[bool, bool]:
    """(a tool span, an agent span) by ``plan.marks`` and the keys alone, as
    ``SessionEvidence.observe_span`` reads them."""
    kind = 0
    for key, kinds in plan.marks:
        kind |= kinds.get(view.attrs.text(key) or "", 0)
    return plan.tool_marked or bool(kind & plans.TOOL), plan.agent_marked or bool(kind & plans.AGENT)


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "execute_tool"},
        {"gen_ai.operation.name": "invoke_agent"},
        {"gen_ai.operation.name": "chat"},
        {"gen_ai.operation.name": "invoke_agent", "openinference.span.kind": "TOOL"},
        {"openinference.span.kind": "AGENT", "tool.name": "Read"},
        {"ai.operationId": "ai.toolCall"},
        {"openinference.span.kind": "LLM"},
    ],
)
def test_a_span_is_a_tool_or_an_agent_span_by_its_plans_marks_as_by_every_marker(
    attributes: dict[str, object],
) -> None:
    view = _span(list(attributes.items()))
    assert _kind(view, plans.plan_of(view.attrs)) == (
        content.has_marker(view, tool_span_facts.TOOL_SPAN_MARKERS),
        content.has_marker(view, tool_span_facts.AGENT_SPAN_MARKERS),
    )


def test_every_recorded_span_is_a_tool_or_an_agent_span_by_its_plans_marks_as_by_every_marker() -> None:
    spans = 0
    for request, _ in recorded_trace_requests():
        for resource_spans in request.resource_spans:
            resource = ResourceView(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    view = SpanView(span, scope_spans.scope.name, resource)
                    expected = (
                        content.has_marker(view, tool_span_facts.TOOL_SPAN_MARKERS),
                        content.has_marker(view, tool_span_facts.AGENT_SPAN_MARKERS),
                    )
                    assert _kind(view, plans.plan_of(view.attrs)) == expected, span.name
                    spans += any(expected)
    assert spans > 300  # tool and agent spans among them
