"""What the judge sends is what the Messages API accepts, model by model: the judge's table
(collector/evaluate/models.py) checked against the fake's own rules (tests/fake_anthropic.py,
written from Anthropic's model pages), and the fake's rules themselves checked against the
real ``anthropic`` client on each provider's route."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest
from fake_anthropic import FakeAnthropic, api_problem, schema_problem, stopped, verdict
from judge_support import Collected, config, load, only, session

from collector.evaluate import models
from collector.evaluate.anthropic import message_params
from collector.evaluate.models import JUDGE_MODELS, judge_model
from collector.evaluate.prices import DEFAULT_MODELS, LIST_PRICES
from evaluators.judge.prompt import Datum, build
from evaluators.judge.verdicts import SELECTION, FollowingScale, Level, OmissionScale, Scale

DEFAULT = DEFAULT_MODELS["anthropic"]
RUBRICS = (
    SELECTION,
    FollowingScale(),
    OmissionScale(("release-notes", "csv-cleanup"), str.lower),
    OmissionScale((), str.lower),
    Scale((Level("good", 1.0, "good"), Level("bad", 0.0, "bad")), 1.0, kind="numerical"),
)


def request_for(model: str, rubric: object = SELECTION) -> object:
    return build(
        "skill_selection_accuracy",
        model,
        "Judge the choice of skill.",
        rubric,  # type: ignore[arg-type]
        [Datum("skill_content", "1. Do it.", stable=True), Datum("user_message", "please")],
        max_input_tokens=10_000,
        max_tokens=2048,
    )


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


def test_every_priced_model_has_a_row_and_its_request_passes_the_apis_rules() -> None:
    assert set(JUDGE_MODELS) == set(LIST_PRICES)
    for name in LIST_PRICES:
        for rubric in RUBRICS:
            body = message_params(request_for(name, rubric))  # type: ignore[arg-type]
            assert api_problem(name, body) == "", (name, rubric)
    for provider, model in DEFAULT_MODELS.items():
        body = message_params(request_for(model), provider)  # type: ignore[arg-type]
        assert api_problem(model, body) == "" and "output_config" in body, provider


def test_the_default_models_request_is_a_structured_output_without_forced_tools() -> None:
    body = message_params(request_for(DEFAULT, FollowingScale()))  # type: ignore[arg-type]
    assert "tools" not in body and "tool_choice" not in body
    assert body["thinking"] == {"type": "between_tools"} and body["max_tokens"] == 2048
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"] == FollowingScale().schema()
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_older_models_keep_the_forced_tool_and_ids_of_every_provider_find_their_row() -> None:
    body = message_params(request_for("claude-sonnet-4-20250514"))  # type: ignore[arg-type]
    assert body["tool_choice"]["type"] == "tool" and "output_config" not in body
    assert judge_model("bedrock", "eu.anthropic.claude-opus-4-1-20250805-v1:0").verdict == "tool"
    assert judge_model("vertex", "claude-sonnet-5-5") is JUDGE_MODELS["claude-sonnet-5-5"]
    assert judge_model("bedrock", "arn:aws:bedrock:eu-west-1:1:application-inference-profile/x") is (
        models.UNKNOWN
    )


def test_the_fakes_rules_refuse_what_the_api_refuses() -> None:
    good = message_params(request_for(DEFAULT))  # type: ignore[arg-type]
    forced = {**good, "tool_choice": {"type": "tool", "name": "record_verdict"}}
    assert "forced tool use" in api_problem(DEFAULT, forced)
    assert "forced tool use" in api_problem(
        "global.anthropic.claude-opus-5-5", {"tool_choice": {"type": "any"}}
    )
    assert api_problem("claude-sonnet-5", {"tool_choice": {"type": "tool", "name": "x"}}) == ""
    assert "between_tools" in api_problem(DEFAULT, {**good, "thinking": {"type": "disabled"}})
    assert "between_tools" in api_problem("claude-sonnet-5", {"thinking": {"type": "between_tools"}})
    assert "effort xhigh" in api_problem(DEFAULT, {**good, "output_config": {"effort": "xhigh"}})
    assert "not supported" in api_problem("claude-sonnet-4", good)
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert "additionalProperties" in schema_problem(open_schema)
    nested = FollowingScale().schema()
    del nested["properties"]["steps"]["items"]["additionalProperties"]
    assert "steps.items" in schema_problem(nested)
    assert "minimum" in schema_problem({"type": "number", "minimum": 0})
    for rubric in RUBRICS:
        assert schema_problem(rubric.schema()) == ""  # type: ignore[attr-defined]


async def test_a_forced_tool_call_on_the_default_model_is_refused_with_400(fake: FakeAnthropic) -> None:
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake.base_url, max_retries=0)
    try:
        with pytest.raises(anthropic.BadRequestError) as err:
            await client.messages.create(
                model=DEFAULT,
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"name": "record_verdict", "input_schema": {"type": "object"}}],
                tool_choice={"type": "tool", "name": "record_verdict"},
            )
        assert err.value.status_code == 400 and "forced tool use" in err.value.message
        assert err.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(
                model=DEFAULT,
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                thinking={"type": "disabled"},
            )
    finally:
        await client.close()
    assert [bool(s.rejected) for s in fake.requests] == [True, True]


async def test_a_refusal_and_a_cut_reply_are_named_and_not_retried(fake: FakeAnthropic) -> None:
    fake.queue(
        stopped("refusal", evaluation="skill_omission"),
        stopped("max_tokens", '{"reasoning": "The user asked', evaluation="skill_selection_accuracy"),
    )
    c = Collected(config(api_key="k", base_url=fake.base_url, backoff="10ms"))
    try:
        await c.run(session("s-1"), session("s-2", loads=[load()]))
    finally:
        await c.runner.close()
    refused = only(c.of("s-1").results, "skill_omission")
    assert (refused.status, refused.reason) == ("error", "judge_refused")
    assert "declined" in refused.explanation and refused.judge is not None and refused.judge.output_tokens
    cut = only(c.of("s-2").results, "skill_selection_accuracy")
    assert (cut.status, cut.reason) == ("error", "judge_truncated")
    assert "raise judge.max_tokens" in cut.explanation
    assert len(fake.of_kind("skill_omission")) == 1 and len(fake.of_kind("skill_selection_accuracy")) == 1


async def test_an_older_model_is_judged_through_the_forced_tool(fake: FakeAnthropic) -> None:
    fake.queue(verdict({"reasoning": "Fits.", "rating": "Yes"}, evaluation="skill_selection_accuracy"))
    c = Collected(config(api_key="k", base_url=fake.base_url, model="claude-sonnet-4-20250514"))
    try:
        await c.run(session(loads=[load()]))
    finally:
        await c.runner.close()
    row = only(c.rows(), "skill_selection_accuracy")
    assert (row.status, row.passed, row.explanation) == ("judged", True, "Fits.")
    (seen,) = fake.of_kind("skill_selection_accuracy")
    assert seen.body["tool_choice"]["name"] == "record_verdict" and not seen.rejected


async def test_a_model_that_thinks_first_still_gives_its_verdict(fake: FakeAnthropic) -> None:
    c = Collected(config(api_key="k", base_url=fake.base_url, model="claude-opus-5-5"))
    try:
        await c.run(session(loads=[load()]))
    finally:
        await c.runner.close()
    assert (only(c.rows(), "skill_selection_accuracy").status, len(fake.requests)) == ("judged", 2)
    for seen in fake.requests:
        assert not seen.rejected and seen.body["output_config"]["effort"] == "low"
        assert "thinking" not in seen.body  # always adaptive on Opus 5.5: "disabled" is a 400
