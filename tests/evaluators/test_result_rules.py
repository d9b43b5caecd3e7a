from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from evaluators import skill_invoked
from evaluators.evidence import Session, SkillLoad
from evaluators.result import EvaluationResult


def test_only_judged_results_carry_a_verdict() -> None:
    with pytest.raises(ValueError, match="carries no score"):
        EvaluationResult("x", "skipped", "sampled_out", "s", 1, passed=True)
    with pytest.raises(ValueError, match="carries no score"):
        EvaluationResult("x", "not_applicable", "no_steps", "s", 1, score=0.0)
    with pytest.raises(ValueError, match="needs a score"):
        EvaluationResult("x", "judged", "ok", "s", 1)
    with pytest.raises(ValueError, match="status must be"):
        EvaluationResult("x", "passed", "ok", "s", 1)  # type: ignore[arg-type]


def test_a_result_is_made_from_its_fields_and_stays_as_made() -> None:
    """The written-out ``__init__`` takes every field, in order, with the field's default."""
    params = list(inspect.signature(EvaluationResult).parameters.values())
    fields = dataclasses.fields(EvaluationResult)
    assert [(p.name, p.default) for p in params] == [
        (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default) for f in fields
    ]
    row = EvaluationResult("x", "skipped", "sampled_out", "s", 2, skill="a", tenant="t")
    assert row == EvaluationResult(**row.to_dict()) == dataclasses.replace(row)
    assert row != dataclasses.replace(row, revision=3) and hash(row) == hash(dataclasses.replace(row))
    assert list(row.to_dict()) == [f.name for f in fields]
    assert pickle.loads(pickle.dumps(row)) == row
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.reason = "ok"  # type: ignore[misc]
    with pytest.raises(ValueError, match="carries no score"):
        dataclasses.replace(row, score=1.0)


def _load(skill: str, status: str, message: str | None = None) -> SkillLoad:
    return SkillLoad(skill, status, "skill_tool", "00" * 8, "00" * 16, message=message)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("loads", "reason", "passed"),
    [
        ([], "not_invoked", False),
        ([_load("Release_Notes", "loaded")], "loaded", True),
        (
            [
                _load("release-notes", "failed", "boom"),
                _load("release-notes", "failed", "Skill 'x' not found"),
            ],
            "load_failed",
            False,
        ),
        ([_load("release-notes", "failed"), _load("release-notes", "loaded")], "loaded", True),
        ([_load("release-notes", "denied")], "load_denied", False),
        ([_load("release-notes", "unresolved")], "unresolved", False),
        ([_load("csv-cleanup", "loaded")], "not_invoked", False),
    ],
)
def test_skill_invoked_reasons(loads: list[SkillLoad], reason: str, passed: bool) -> None:
    session = Session(
        "s", skill_loads=loads, expected_skills=["release-notes"], first_agent_span=("a" * 32, "b" * 16)
    )
    (row,) = skill_invoked.evaluate(session)
    assert (row.reason, row.passed, row.status) == (reason, passed, "judged")
    if reason == "load_failed":
        assert "2 attempts" in row.explanation and "not found" in row.explanation
    if reason == "not_invoked":
        assert row.span_id == "b" * 16  # session-level: anchored to the first agent span


def test_no_expectation_no_row() -> None:
    assert skill_invoked.evaluate(Session("s", skill_loads=[_load("x", "loaded")])) == []
