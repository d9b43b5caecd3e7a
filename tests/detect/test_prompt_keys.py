"""Which keys no table names are read for prompt text (``plans.prompt_key``): a key saying it
may hold a prompt, unless its name says it holds no text (a count, a size, an id, a name, the
provider)."""

from __future__ import annotations

import pytest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.detect import plans
from collector.detect.facts import prompts as prompt_facts
from collector.otlp.views import ResourceView, SpanView


@pytest.mark.parametrize(
    "key",
    [
        "gen_ai.usage.prompt_tokens",  # a count
        "llm.token_count.prompt",
        "llm.token_count.prompt_details.cache_read",
        "gen_ai.input.messages.size",  # a size
        "gen_ai.output.messages.size",
        "qwen-code.prompt_id",  # an id
        "gen_ai.prompt.name",  # a name
        "gen_ai.system",  # the provider
        "llm.system",
        "Gen_AI.Usage.Prompt_Tokens",  # compared casefolded
    ],
)
def test_a_key_naming_no_text_is_not_read_for_a_prompt(key: str) -> None:
    assert any(word in key.casefold() for word in prompt_facts.PROMPT_KEY_WORDS)  # the words match it
    assert not plans.prompt_key(key)


@pytest.mark.parametrize(
    "key",
    ["system_prompt", "agent.instructions", "app.prompt", "my_harness.system_message", "request_body"],
)
def test_a_key_saying_it_may_hold_a_prompt_is_read(key: str) -> None:
    assert plans.prompt_key(key)


def test_a_span_of_counts_and_a_provider_reads_nothing() -> None:
    """A GenAI span recording only the provider and its token counts holds no key any reader
    of text reads: the readers are skipped for it (``SpanPlan.reads_nothing``)."""
    span = Span()
    span.attributes.add(key="gen_ai.system").value.string_value = "anthropic"
    span.attributes.add(key="gen_ai.request.model").value.string_value = "claude"
    for count in ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"):
        span.attributes.add(key=count).value.int_value = 120
    plan = plans.plan_of(SpanView(span, "", ResourceView(Resource())).attrs)
    assert plan.others == ()
    assert plan.reads_nothing
