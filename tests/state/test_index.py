"""The listing's rows of an evaluated revision (``collector.state.index.prepare``) are the
same whether they are made from the coverage line the recorder has in hand or read from the
stored text (as an older spool's rows are at open)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from collector.state import index
from collector.state.types import encode_record, with_results
from evaluators.evidence import Catalog, CatalogEntry, Session, SkillLoad
from evaluators.result import Coverage, EvaluationResult, JudgeUsage, judged, unjudged


def coverages() -> list[Coverage]:
    load = SkillLoad("pdf", "loaded", "skill_tool", "00000000000000aa", "0" * 31 + "1", body="# PDF")
    failed = SkillLoad("xlsx", "failed", "skill_tool", "00000000000000bb", "0" * 31 + "1")
    plain = Session("plain-1", framework="strands", span_count=3, close_reason="idle_timeout")
    busy = Session(
        "a b/c?d",  # quoted in its detail path
        revision=2,
        framework="claude_code",
        skill_loads=[load, failed],
        catalog=Catalog("advertised", {"pdf": CatalogEntry("pdf"), "docx": CatalogEntry("docx")}),
        expected_skills=["pdf", "docx"],
        span_count=12,
        close_reason="end_attribute",
        tenant="acme",
    )
    usage = JudgeUsage("claude", input_tokens=900, output_tokens=40, cost_usd=0.0042)
    return [
        Coverage(plain, [unjudged("skill_omission", plain, "not_applicable", "no_catalog", "no catalog")]),
        Coverage(
            busy,
            [
                EvaluationResult(
                    "skill_invoked",
                    "judged",
                    "loaded",
                    busy.session_id,
                    2,
                    score=1.0,
                    passed=True,
                    skill="pdf",
                    tenant="acme",
                ),
                EvaluationResult(
                    "skill_invoked",
                    "judged",
                    "not_invoked",
                    busy.session_id,
                    2,
                    score=0.0,
                    passed=False,
                    skill="docx",
                    tenant="acme",
                ),
                judged(
                    "skill_omission",
                    busy,
                    score=0.0,
                    passed=False,
                    label="missed",
                    reason="verdict",
                    judge=usage,
                ),
                judged("skill_omission", busy, score=0.0, passed=False, label="missed", reason="again"),
                judged(
                    "skill_omission", busy, score=1.0, passed=True, label="ok", reason="verdict", judge=usage
                ),
                unjudged(
                    "skill_selection_accuracy",
                    busy,
                    "skipped",
                    "budget_exhausted",
                    "over budget",
                    skill="xlsx",
                ),
                unjudged("skill_instruction_following", busy, "error", "judge_timeout", "timed out"),
            ],
        ),
        Coverage(Session("empty", close_reason="shutdown"), []),
    ]


def recorded(coverage: Coverage, closed_at: float) -> tuple[index.Indexed, dict[str, Any]]:
    """What the recorder hands the store for ``coverage``: the stored text, and the line
    with its results as dicts (``collector.state.recorder.Recorder._record``)."""
    results = [r.to_dict() for r in coverage.results]
    line = coverage.to_dict()
    line["closed_at"] = closed_at
    text = with_results(encode_record(line), [encode_record(r) for r in results])
    line["results"] = results
    return (coverage.session.key, coverage.session.revision, text, 1000.0), line


def parsed(prepared: index.Prepared) -> index.Prepared:
    """``prepared`` with each listing row read (its keys' order aside)."""
    at = index._COVERAGE.index("summary")
    rows, verdicts = prepared
    return [(*r[:at], orjson.loads(r[at]), *r[at + 1 :]) for r in rows], verdicts


@pytest.mark.parametrize("closed_at", [1234.5, 99])
def test_rows_from_the_recorders_line_are_the_rows_read_from_its_text(closed_at: float) -> None:
    made = [recorded(c, closed_at) for c in coverages()]
    revisions = [r for r, _ in made]
    from_lines = index.prepare(revisions, [line for _, line in made])
    assert parsed(from_lines) == parsed(index.prepare(revisions))
    rows, verdicts = from_lines
    assert len(verdicts) == 8
    busy = dict(zip(index._COVERAGE, rows[1], strict=True))
    assert (busy["tenant"], busy["framework"], busy["closed_at"]) == ("acme", "claude_code", float(closed_at))
    assert (busy["expects"], busy["missed"], busy["omission_judged"], busy["omission_failed"]) == (1, 1, 3, 2)
    assert busy["judge_cost"] == pytest.approx(0.0084)
    assert (busy["loads_loaded"], busy["loads_failed"]) == (1, 1)
    summary = orjson.loads(busy["summary"])
    assert summary["detail"] == "/v1/sessions/a%20b%2Fc%3Fd?tenant=acme"
    assert [e["passed"] for e in summary["evaluations"]] == [True, False, False, False, True, None, None]


def test_a_line_the_recorder_did_not_make_whole_fails_rather_than_guesses() -> None:
    (revision, line), *_ = [recorded(c, 1.0) for c in coverages()]
    del line["loads_by_status"]
    with pytest.raises(KeyError):
        index.prepare([revision], [line])
