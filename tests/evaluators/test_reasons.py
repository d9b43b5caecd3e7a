"""Every not-applicable and skipped reason, each with ``passed`` null (never a pass)."""

from __future__ import annotations

import pytest
from judge_support import Collected, config, load, only, session

from evaluators.evidence import Catalog, ToolCall, Turn
from evaluators.judge.base import JudgeFailure
from evaluators.judge.testing import FakeJudge
from evaluators.result import EvaluationResult


def _valid(request):  # type: ignore[no-untyped-def]
    props = request.tool_schema["properties"]
    if "should_have_used_skill" in props:
        return {"reasoning": "fine", "should_have_used_skill": False, "skill": None}
    if "steps" in props:
        return {
            "reasoning": "ok",
            "steps": [{"step": "a", "status": "covered", "evidence": "x"}],
            "rating": "Fully Followed",
        }
    return {"reasoning": "ok", "rating": props["rating"]["enum"][0]}


def _empty_catalog() -> Catalog:
    c = Catalog()
    c.advertise([], "available_skills_xml")  # advertised, but empty
    return c


def _assert_unjudged(row: EvaluationResult, status: str, reason: str) -> None:
    assert (row.status, row.reason) == (status, reason), row
    assert row.passed is None and row.score is None and row.label is None
    assert row.explanation


async def test_no_judge_configured_skips_every_judge_evaluation_but_runs_deterministic_ones() -> None:
    cfg = config(
        {
            "expectations": [{"when": {"user_message": "release"}, "expect": "release-notes"}],
            "evaluators": {
                "custom": [
                    {
                        "name": "tone",
                        "instructions": "Is {context} polite?",
                        "rating_scale": [
                            {"label": "Good", "value": 1, "definition": "polite"},
                            {"label": "Bad", "value": 0, "definition": "rude"},
                        ],
                    }
                ]
            },
        }
    )
    c = Collected(cfg)  # no judge.api_key / base_url
    assert c.runner.judge is None
    s = session(loads=[load()])
    s.expected_skills = ["release-notes"]
    await c.run(s, session("s-2", loads=[]))
    rows = c.rows()
    invoked = only(c.of("s-1").results, "skill_invoked")
    assert (invoked.status, invoked.passed) == ("judged", True)
    for name in ("skill_selection_accuracy", "skill_instruction_following", "custom.tone"):
        _assert_unjudged(only(c.of("s-1").results, name), "skipped", "no_judge_configured")
    _assert_unjudged(only(c.of("s-2").results, "skill_omission"), "skipped", "no_judge_configured")
    assert all(r.judge is None for r in rows)


@pytest.mark.parametrize(
    ("loads", "reason"),
    [
        ([load(status="failed", body=None, message="Skill 'x' not found")], "load_failed"),
        ([load(status="denied", body=None)], "load_denied"),
        ([load(status="unresolved", body=None)], "unresolved"),
        (
            [load(skill="incident-report", body=None)],
            "body_unavailable",
        ),  # not in the (empty) registry either
    ],
)
async def test_following_not_applicable_reasons(loads: list, reason: str) -> None:  # type: ignore[type-arg]
    judge = FakeJudge(_valid)
    c = Collected(config(), judge)
    await c.run(session(loads=loads))
    _assert_unjudged(only(c.rows(), "skill_instruction_following"), "not_applicable", reason)
    # the selection of that load is still judged, as a choice
    assert only(c.rows(), "skill_selection_accuracy").status == "judged"


async def test_no_steps_is_not_applicable_with_the_judges_usage() -> None:
    def script(request):  # type: ignore[no-untyped-def]
        if "steps" in request.tool_schema["properties"]:
            return {"reasoning": "Background material only.", "steps": [], "rating": "Fully Followed"}
        return _valid(request)

    c = Collected(config(), FakeJudge(script))
    await c.run(session(loads=[load()]))
    row = only(c.rows(), "skill_instruction_following")
    _assert_unjudged(row, "not_applicable", "no_steps")
    assert row.judge is not None and row.judge.input_tokens == 100  # the call it cost is on the row


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"loads": [load()]}, "skill_loaded"),
        ({"cat": Catalog()}, "no_catalog"),
        ({"cat": _empty_catalog()}, "empty_catalog"),
        ({"turns": [], "calls": []}, "no_trajectory"),
    ],
)
async def test_omission_not_applicable_reasons(kwargs: dict, reason: str) -> None:  # type: ignore[type-arg]
    c = Collected(config(), FakeJudge(_valid))
    await c.run(session(**kwargs))
    _assert_unjudged(only(c.rows(), "skill_omission"), "not_applicable", reason)


async def test_omission_not_applicable_when_tool_content_was_not_captured() -> None:
    c = Collected(config(), FakeJudge(_valid))
    s = session()
    s.content_capture = "missing"
    await c.run(s)
    _assert_unjudged(only(c.rows(), "skill_omission"), "not_applicable", "content_not_captured")


async def test_selection_without_any_request_or_context_is_not_applicable() -> None:
    c = Collected(config(), FakeJudge(_valid))
    await c.run(session(loads=[load()], turns=[]))
    _assert_unjudged(only(c.rows(), "skill_selection_accuracy"), "not_applicable", "no_trajectory")


async def test_sampled_out_is_skipped_and_deterministic() -> None:
    cfg = config({"evaluators": {"skill_omission": {"sampling": 0.01}}})
    judge = FakeJudge(_valid)
    c = Collected(cfg, judge)
    await c.run(*(session(f"s-{i}") for i in range(30)))
    rows = c.rows("skill_omission")
    assert len(rows) == 30 and not judge.requests
    for row in rows:
        _assert_unjudged(row, "skipped", "sampled_out")
        assert "0.01%" in row.explanation


async def test_budget_exhausted_is_skipped() -> None:
    # each call reserves its input estimate + max_tokens, and bills 3020 tokens
    cfg = config({"judge": {"max_tokens": 1024, "budget": {"tokens_per_hour": 7000}}})
    c = Collected(cfg, FakeJudge(_valid, input_tokens=3000))
    await c.run(*(session(f"s-{i}", loads=[load()]) for i in range(3)))
    judged = [r for r in c.rows() if r.status == "judged" and r.judge is not None]
    skipped = [r for r in c.rows() if r.status == "skipped"]
    assert len(judged) == 2 and len(skipped) == 4  # the third call would not fit under 7000
    for row in skipped:
        _assert_unjudged(row, "skipped", "budget_exhausted")
        assert "tokens_per_hour budget 7000 reached" in row.explanation


async def test_a_session_past_its_input_token_cap_is_skipped_and_the_next_session_is_judged() -> None:
    cfg = config({"judge": {"max_session_input_tokens": 5000}})
    c = Collected(cfg, FakeJudge(_valid, input_tokens=3000))  # selection and following: 2 calls each
    await c.run(session("s-1", loads=[load()]), session("s-2", loads=[load()]))
    for sid in ("s-1", "s-2"):
        rows = [r for r in c.of(sid).results if r.evaluation != "skill_invoked"]
        assert [r.status for r in rows].count("judged") == 1, rows  # the second call would pass 5000
        skipped = [r for r in rows if r.status == "skipped"]
        assert len(skipped) == 1
        _assert_unjudged(skipped[0], "skipped", "budget_exhausted")
        assert "max_session_input_tokens 5000 reached" in skipped[0].explanation


def test_the_judge_has_a_daily_usd_budget_and_a_session_cap_by_default() -> None:
    cfg = config({})
    assert cfg.judge.budget.usd_per_day == 50
    assert cfg.judge.max_session_input_tokens == 2_000_000
    assert config({"judge": {"budget": {"tokens_per_hour": 10}}}).judge.budget.usd_per_day == 50
    assert config({"judge": {"budget": {"usd_per_day": None}}}).judge.budget.usd_per_day is None


async def test_work_beyond_max_queue_waits_and_is_judged() -> None:
    cfg = config({"judge": {"max_queue": 2}})
    c = Collected(cfg, FakeJudge(_valid))
    await c.run(session(loads=[load(), load("csv-cleanup", n=2)]))  # 2 selection + 2 following + omission N/A
    judge_rows = [r for r in c.rows() if r.evaluation != "skill_omission"]
    assert len(judge_rows) == 4 and {r.status for r in judge_rows} == {"judged"}
    assert c.metrics.judge_queue._value.get() == 0  # drained


@pytest.mark.parametrize(
    "failure",
    [
        JudgeFailure("timeout", "slow"),
        JudgeFailure("rate_limited", "429"),
        JudgeFailure("overloaded", "529"),
        JudgeFailure("error", "500", extra={"transient": True}),
    ],
)
async def test_a_judge_that_stays_unreachable_past_max_wait_is_an_error_that_says_so(
    failure: JudgeFailure,
) -> None:
    cfg = config(max_wait="0.3s", requeue_backoff="0.02s", requeue_max_backoff="0.05s")
    judge = FakeJudge(lambda _r: failure)
    c = Collected(cfg, judge)
    await c.run(session(loads=[load()]))
    rows = [only(c.rows(), name) for name in ("skill_selection_accuracy", "skill_instruction_following")]
    for row in rows:
        _assert_unjudged(row, "error", "judge_unreachable_timeout")
        assert "judge.max_wait 0.3s" in row.explanation
    # While the judge fails, one evaluation probes it; its row names the last failure.
    assert any(str(failure) in row.explanation for row in rows)
    assert len(judge.requests) > 2  # tried again while it waited
    assert c.metrics.judge_failures.labels(failure.kind)._value.get() == len(judge.requests)


async def test_a_judge_that_comes_back_within_max_wait_gives_verdicts() -> None:
    answers = iter([JudgeFailure("overloaded", "529")] * 5)
    cfg = config(max_wait="30s", requeue_backoff="0.01s", requeue_max_backoff="0.02s")
    c = Collected(cfg, FakeJudge(lambda r: next(answers, None) or _valid(r)))
    await c.run(session(loads=[load()]))
    rows = [r for r in c.rows() if r.evaluation != "skill_omission"]
    assert rows and {r.status for r in rows} == {"judged"}


async def test_a_final_judge_error_is_not_retried() -> None:
    judge = FakeJudge(lambda _r: JudgeFailure("error", "HTTP 400: bad request"))
    c = Collected(config(), judge)
    await c.run(session(loads=[load()]))
    for name in ("skill_selection_accuracy", "skill_instruction_following"):
        _assert_unjudged(only(c.rows(), name), "error", "judge_error")
    assert len(judge.requests) == 2  # one call each


async def test_invalid_verdict_twice_is_judge_unparseable() -> None:
    judge = FakeJudge(lambda _r: {"reasoning": "sure", "rating": "Absolutely"})
    c = Collected(config(), judge)
    await c.run(session(loads=[load()]))
    row = only(c.rows(), "skill_selection_accuracy")
    _assert_unjudged(row, "error", "judge_unparseable")
    assert "'Absolutely' is not one of 'Yes', 'No'" in row.explanation
    selection_calls = [r for r in judge.requests if r.evaluation == "skill_selection_accuracy"]
    assert len(selection_calls) == 2  # one retry, with a note saying what was wrong
    assert "previous verdict was invalid" in selection_calls[1].content[-1].text
    assert row.judge is not None and row.judge.input_tokens == 200  # both calls billed on the row


async def test_following_rating_must_agree_with_the_steps() -> None:
    def script(request):  # type: ignore[no-untyped-def]
        if "steps" in request.tool_schema["properties"]:
            return {
                "reasoning": "r",
                "steps": [
                    {"step": "a", "status": "covered", "evidence": "x"},
                    {"step": "b", "status": "skipped", "evidence": "-"},
                ],
                "rating": "Fully Followed",
            }
        return _valid(request)

    c = Collected(config(), FakeJudge(script))
    await c.run(session(loads=[load()]))
    row = only(c.rows(), "skill_instruction_following")
    _assert_unjudged(row, "error", "judge_unparseable")
    assert "skipped but the rating is Fully Followed" in row.explanation


async def test_omission_must_name_an_advertised_skill() -> None:
    c = Collected(
        config(), FakeJudge(lambda _r: {"reasoning": "r", "should_have_used_skill": True, "skill": "made-up"})
    )
    await c.run(session())
    _assert_unjudged(only(c.rows(), "skill_omission"), "error", "judge_unparseable")


async def test_omission_judged_names_the_skill() -> None:
    c = Collected(
        config(),
        FakeJudge(lambda _r: {"reasoning": "r", "should_have_used_skill": True, "skill": "Release_Notes"}),
    )
    await c.run(session())
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.score, row.passed, row.skill, row.label) == (
        "judged",
        0.0,
        False,
        "release-notes",
        "skill_omitted",
    )


async def test_shutdown_deadline_records_skipped_rows() -> None:
    import asyncio

    class Stuck:
        async def complete(self, request):  # type: ignore[no-untyped-def]
            await asyncio.sleep(60)

        async def close(self) -> None:
            pass

    c = Collected(config(), Stuck())  # type: ignore[arg-type]
    await c.runner.consume(session(loads=[load()]))
    await c.runner.drain(0.05)
    (coverage,) = c.coverages
    stuck = [r for r in coverage.results if r.reason == "shutdown"]
    assert len(stuck) == 2
    for row in stuck:
        _assert_unjudged(row, "skipped", "shutdown")


async def test_custom_triggering_follows_the_placeholders() -> None:
    scale = [
        {"label": "Good", "value": 1, "definition": "d"},
        {"label": "Bad", "value": 0, "definition": "d"},
    ]
    cfg = config(
        {
            "evaluators": {
                "custom": [
                    {
                        "name": "per-load",
                        "level": "tool_call",
                        "instructions": "Was {invoked_skill} sensible for {user_message}?",
                        "rating_scale": scale,
                    },
                    {
                        "name": "per-body",
                        "level": "tool_call",
                        "instructions": "Did {context} obey {skill_content}?",
                        "rating_scale": scale,
                    },
                    {
                        "name": "per-call",
                        "level": "tool_call",
                        "instructions": "Was {tool_turn} useful?",
                        "rating_scale": scale,
                    },
                    {
                        "name": "per-session",
                        "level": "session",
                        "instructions": "Was {context} polite?",
                        "rating_scale": scale,
                        "pass_threshold": 0.5,
                    },
                ]
            }
        }
    )
    judge = FakeJudge(_valid)
    c = Collected(cfg, judge)
    calls = [
        ToolCall("skills", "01" * 8, "ab" * 16, 1, arguments='{"skill_name": "release-notes"}', result="ok"),
        ToolCall("bash", "02" * 8, "ab" * 16, 2, arguments="ls", result="a b"),
    ]
    await c.run(
        session(
            loads=[load(), load(n=2), load("csv-cleanup", status="failed", body=None, n=3)],
            calls=calls,
            turns=[Turn("Write release notes", "03" * 8, "ab" * 16, 0, "done")],
        )
    )
    assert len(c.rows("custom.per-load")) == 3  # one per load
    per_body = c.rows("custom.per-body")  # one per distinct skill; the failed one is N/A
    assert sorted((r.skill, r.status) for r in per_body) == [
        ("csv-cleanup", "not_applicable"),
        ("release-notes", "judged"),
    ]
    assert len(c.rows("custom.per-call")) == 2
    (session_row,) = c.rows("custom.per-session")
    assert (session_row.status, session_row.label, session_row.passed) == ("judged", "Good", True)
    per_body_request = next(r for r in judge.requests if r.evaluation == "custom.per-body")
    assert "[the 'skill_content' data block]" in per_body_request.system[0].text
    assert "Group the changes" in per_body_request.content[0].text and per_body_request.content[0].cache
