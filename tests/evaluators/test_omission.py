"""skill_omission as a newcomer meets it: judged in every eligible session by default, a
verdict that can only name an advertised skill, and failed or denied loads as evidence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_anthropic import FakeAnthropic, verdict
from judge_support import Collected, catalog, load, only, session

from collector.config import parse
from collector.evaluate.config import Defaults
from evaluators.evidence import fold_skill_name
from evaluators.judge.verdicts import OmissionScale


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


def default_config(fake: FakeAnthropic) -> Collected:
    """The default configuration with a judge: nothing about sampling or evaluators."""
    return Collected(parse({"judge": {"base_url": fake.base_url, "api_key": "test-key"}}))


def test_omission_samples_every_session_by_default_and_the_daily_budget_guards_it() -> None:
    defaults = Defaults()
    assert defaults.evaluators.skill_omission.sampling == 100.0
    assert defaults.judge.budget.usd_per_day == 50.0


async def test_every_eligible_session_is_judged_with_the_default_config(fake: FakeAnthropic) -> None:
    c = default_config(fake)
    ids = [f"s-{i}" for i in range(30)]
    await c.run(*(session(sid) for sid in ids))
    rows = [only(c.of(sid).results, "skill_omission") for sid in ids]
    assert [(r.status, r.reason) for r in rows] == [("judged", "correctly_declined")] * 30
    assert len(fake.of_kind("skill_omission")) == 30
    await c.runner.close()


async def test_the_verdict_can_only_name_an_advertised_skill_or_none(fake: FakeAnthropic) -> None:
    c = default_config(fake)
    await c.run(session(cat=catalog("release-notes", "csv-cleanup")))
    (seen,) = fake.of_kind("skill_omission")
    skill = seen.schema["properties"]["skill"]
    assert skill["enum"] == ["release-notes", "csv-cleanup", None]
    assert skill["type"] == ["string", "null"]
    await c.runner.close()
    scale = OmissionScale(("release-notes",), fold_skill_name)
    outside = scale.read({"reasoning": "r", "should_have_used_skill": True, "skill": "pdf-report"})
    assert not outside.valid  # what the schema now keeps the model from sending


@pytest.mark.parametrize(
    ("status", "message"),
    [("failed", "Skill 'relese-notes' not found"), ("denied", "The user denied this tool call")],
)
async def test_a_session_whose_only_load_did_not_succeed_is_judged_with_the_attempt_as_evidence(
    fake: FakeAnthropic, status: str, message: str
) -> None:
    fake.queue(
        verdict(
            {
                "reasoning": "The load of relese-notes failed; release-notes fits the request.",
                "should_have_used_skill": True,
                "skill": "release-notes",
            },
            evaluation="skill_omission",
        )
    )
    c = default_config(fake)
    await c.run(session(loads=[load("relese-notes", status=status, body=None, message=message)]))
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.passed, row.skill, row.reason) == (
        "judged",
        False,
        "release-notes",
        "skill_omitted",
    )
    (seen,) = fake.of_kind("skill_omission")
    blocks = seen.blocks()  # parsed from their fences: a block exists only if it was fenced
    assert blocks["unsuccessful_skill_loads"] == f"- relese-notes: {status} (skill_tool): {message}"
    assert "Write release notes" in blocks["session"]
    (nonce,) = {n for n in seen.nonces() if f"<<<UNTRUSTED unsuccessful_skill_loads {n}>>>" in seen.user_text}
    assert nonce in seen.user_text.split("End of data.")[-1]  # the closing note names the fence
    await c.runner.close()


async def test_without_unsuccessful_loads_the_prompt_says_there_were_none(fake: FakeAnthropic) -> None:
    c = default_config(fake)
    await c.run(session())
    (seen,) = fake.of_kind("skill_omission")
    assert seen.blocks()["unsuccessful_skill_loads"].startswith("(none")
    await c.runner.close()


@pytest.mark.parametrize(
    ("loads", "explanation"),
    [
        ([load(), load("relese-notes", status="failed", body=None, n=2)], "loaded a skill 1 time"),
        ([load(status="unresolved", body=None)], "(outcome not recorded)"),
    ],
)
async def test_a_load_that_may_have_succeeded_makes_omission_not_applicable(
    fake: FakeAnthropic, loads: list[object], explanation: str
) -> None:
    c = default_config(fake)
    await c.run(session(loads=loads))  # type: ignore[arg-type]
    row = only(c.rows(), "skill_omission")
    assert (row.status, row.reason) == ("not_applicable", "skill_loaded")
    assert explanation in row.explanation
    assert fake.of_kind("skill_omission") == []
    await c.runner.close()
