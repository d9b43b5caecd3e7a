"""The pure parts of the judge: sampling, budgets, retry policy, truncation, registry, config."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_support import RELEASE_BODY, SKILLS, Collected, config, load, only, session

from collector.config import ConfigError, parse
from collector.evaluate.retry import RetryPolicy, requeue_delay, retry_after
from evaluators.judge import prompt
from evaluators.judge.budget import Budget, Budgets, Limits
from evaluators.judge.sampling import sampled_in
from evaluators.judge.testing import FakeJudge
from evaluators.registry import RegistryError, load_registry, same_body


def test_sampling_is_deterministic_per_session_and_independent_per_evaluator() -> None:
    ids = [f"session-{i}" for i in range(4000)]
    picked = [i for i in ids if sampled_in(i, "skill_omission", 10)]
    assert picked == [i for i in ids if sampled_in(i, "skill_omission", 10)]  # same answer every time
    assert 300 < len(picked) < 500  # ~10 %
    other = {i for i in ids if sampled_in(i, "skill_selection_accuracy", 10)}
    assert len(other & set(picked)) < 100  # independent draws, not the same 10 %
    assert all(sampled_in(i, "x", 100) for i in ids[:50])


class Clock:
    def __init__(self, now: float = 7200.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_budget_reserves_settles_and_rolls_over() -> None:
    clock = Clock()
    budget = Budget("judge", Limits(tokens_per_hour=1000, usd_per_day=1.0), clock)
    assert budget.refusal(600, 0.1) is None
    first = budget.reserve(600, 0.1)
    assert "tokens_per_hour budget 1000 reached" in (budget.refusal(600, 0.1) or "")  # the reservation counts
    budget.settle(first, 200, 0.05)  # the call cost less than estimated
    assert budget.refusal(600, 0.1) is None
    assert budget.used() == {"tokens_hour": 200, "tokens_day": 200, "usd_hour": 0.05, "usd_day": 0.05}
    clock.now += 3600  # next hour: tokens reset, dollars of the day do not
    assert budget.used()["tokens_hour"] == 0 and budget.used()["usd_day"] == pytest.approx(0.05)
    assert "usd_per_day budget 1 reached" in (budget.refusal(1, 0.96) or "")
    clock.now += 86400
    assert budget.refusal(1, 0.96) is None


def test_all_budgets_must_admit() -> None:
    clock = Clock()
    both = Budgets(
        [Budget("judge", Limits(), clock), Budget("skill_omission", Limits(tokens_per_day=10), clock)]
    )
    reservations, why = both.try_reserve(11, 0.0)
    assert reservations == [] and why and why.startswith("skill_omission tokens_per_day")


@pytest.mark.parametrize(
    ("attempt", "status", "headers", "expected"),
    [
        (0, 429, {"retry-after": "7"}, 7.0),
        (0, 529, {"retry-after-ms": "250"}, 0.25),
        (0, 500, {}, "backoff"),
        (0, 503, {}, "backoff"),
        (0, None, {}, "backoff"),  # timeout / connection error
        (0, 400, {}, None),  # a bad request does not improve with time
        (0, 401, {}, None),
        (3, 429, {"retry-after": "1"}, None),  # out of retries
        (0, 429, {"retry-after": "999"}, None),  # longer than max_retry_after
    ],
)
def test_retry_policy_table(
    attempt: int, status: int | None, headers: dict[str, str], expected: object
) -> None:
    policy = RetryPolicy(max_retries=3, backoff=1.0, max_backoff=30.0, max_retry_after=120.0)
    delay = policy.delay(attempt, status, headers)
    if expected == "backoff":
        assert delay is not None and 0.75 <= delay <= 1.25
    else:
        assert delay == expected


@pytest.mark.parametrize(
    ("failures", "low", "high"), [(1, 0.5, 1.0), (2, 1.0, 2.0), (4, 4.0, 8.0), (9, 15.0, 30.0)]
)
def test_requeue_delay_doubles_is_capped_and_jittered(failures: int, low: float, high: float) -> None:
    delays = {requeue_delay(failures, backoff=1.0, cap=30.0) for _ in range(200)}
    assert all(low <= d <= high for d in delays) and len(delays) > 1


def test_retry_after_http_date() -> None:
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == pytest.approx(
        10.0
    )
    assert retry_after({"retry-after": "soon"}) is None


def test_head_and_tail_keeps_both_ends() -> None:
    text = "START " + "x" * 10_000 + " END"
    cut = prompt.head_and_tail(text, 1000)
    assert cut.startswith("START") and cut.endswith("END") and "omitted" in cut and len(cut) < 1100


async def test_long_context_is_truncated_and_recorded() -> None:
    judge = FakeJudge(lambda r: {"reasoning": "ok", "should_have_used_skill": False, "skill": None})
    cfg = config({"judge": {"max_input_tokens": 2000}})
    c = Collected(cfg, judge)
    s = session()
    s.turns[0].user_message = "FIRST-REQUEST " + "lorem ipsum " * 5000 + " LAST-WORDS"
    await c.run(s)
    row = only(c.rows(), "skill_omission")
    assert row.status == "judged" and row.judge is not None and row.judge.context_truncated
    (request,) = judge.requests
    text = request.content[-1].text
    assert "FIRST-REQUEST" in text and "LAST-WORDS" in text and "characters omitted" in text
    assert request.chars() < 2000 * prompt.CHARS_PER_TOKEN + 2000
    assert "Some data was cut" in text
    assert c.coverages[0].to_dict()["judge"]["context_truncated"] == 1


def _write(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_text(text)


def test_registry_loads_the_fixture_skills() -> None:
    registry = load_registry([str(SKILLS)])
    assert sorted(s.name for s in registry.skills.values()) == [
        "csv-cleanup",
        "incident-report",
        "release-notes",
    ]
    assert registry.get("Release_Notes") is not None


@pytest.mark.parametrize(
    ("folder", "text", "message"),
    [
        ("bad", "no frontmatter", "does not start with a '---'"),
        ("Bad_Name", "---\nname: Bad_Name\ndescription: d\n---\nbody", "must be 1-64 chars"),
        ("other", "---\nname: thing\ndescription: d\n---\nbody", "must match its folder 'other'"),
        ("empty", "---\nname: empty\ndescription: d\n---\n", "has no instructions"),
    ],
)
def test_registry_problems_are_config_errors(tmp_path: Path, folder: str, text: str, message: str) -> None:
    _write(tmp_path, folder, text)
    with pytest.raises(ConfigError) as err:
        parse({"skills": {"paths": [str(tmp_path)]}})
    assert str(err.value).startswith("skills.paths:") and message in str(err.value)
    assert str(tmp_path / folder / "SKILL.md") in str(err.value)


def test_registry_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="not a directory"):
        load_registry([str(tmp_path / "nope")])


def test_every_judge_model_needs_a_price() -> None:
    with pytest.raises(ConfigError, match="no price for model 'claude-other'"):
        parse(
            {
                "judge": {"base_url": "http://127.0.0.1:1", "budget": {"usd_per_day": 5}},
                "evaluators": {"skill_omission": {"model": "claude-other"}},
            }
        )
    parse(
        {
            "judge": {
                "base_url": "http://127.0.0.1:1",
                "prices": {"claude-other": {"input": 1, "output": 5}},
            },
            "evaluators": {"skill_omission": {"model": "claude-other"}},
        }
    )
    parse({"evaluators": {"skill_omission": {"model": "claude-other"}}})  # no judge: nothing to price


def test_custom_evaluator_config_errors() -> None:
    scale = [{"label": "A", "value": 1, "definition": "d"}, {"label": "B", "value": 0, "definition": "d"}]
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \{contxt\}"):
        parse({"evaluators": {"custom": [{"name": "x", "instructions": "{contxt}", "rating_scale": scale}]}})
    with pytest.raises(ConfigError, match="distinct label"):
        parse(
            {
                "evaluators": {
                    "custom": [{"name": "x", "instructions": "i", "rating_scale": [scale[0], scale[0]]}]
                }
            }
        )
    with pytest.raises(ConfigError, match=r"evaluators\.skill_omission\.samplng: unknown key"):
        parse({"evaluators": {"skill_omission": {"samplng": 5}}})


def test_same_body_tolerates_harness_decoration() -> None:
    registered = RELEASE_BODY.split("---", 2)[2].strip()
    assert same_body(RELEASE_BODY, registered)  # frontmatter kept
    assert same_body(registered + "\n\n---\nLocation: /x/SKILL.md", registered)  # Strands trailer
    assert not same_body(registered.replace("past tense", "present tense"), registered)


async def test_traced_body_differing_from_registry_is_counted_and_the_trace_wins() -> None:
    changed = RELEASE_BODY.replace("past tense", "present tense")

    def script(r):  # type: ignore[no-untyped-def]
        props = r.tool_schema["properties"]
        if "should_have_used_skill" in props:
            return {"reasoning": "ok", "should_have_used_skill": True, "skill": "incident-report"}
        if "steps" in props:
            return {
                "reasoning": "ok",
                "steps": [{"step": "s", "status": "covered", "evidence": "e"}],
                "rating": "Fully Followed",
            }
        return {"reasoning": "ok", "rating": "Yes"}

    judge = FakeJudge(script)
    c = Collected(config({"skills": {"paths": [str(SKILLS)]}}), judge)
    await c.run(session(loads=[load(body=changed)]), session("s-2", loads=[load(body=None)]))
    assert c.metrics.registry_body_mismatch.labels("release-notes")._value.get() == 1
    traced, registered = c.rows("skill_instruction_following")
    assert (traced.body_source, registered.body_source) == ("trace", "registry")
    bodies = [r.content[0].text for r in judge.requests if "steps" in r.tool_schema["properties"]]
    assert "present tense" in bodies[0] and "past tense" in bodies[1]
    # no trace catalog? selection and omission use the registry's, and say so
    c2 = Collected(config({"skills": {"paths": [str(SKILLS)]}}), judge)
    from evaluators.evidence import Catalog

    await c2.run(session("s-3", cat=Catalog()))
    row = only(c2.rows(), "skill_omission")
    assert (row.status, row.catalog_source, row.skill) == ("judged", "registry", "incident-report")
    assert "incident-report" in judge.requests[-1].content[0].text
