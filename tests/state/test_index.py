"""The listing's rows of an evaluated revision (``collector.state.index.prepare``) are the
same whether they are made from the coverage line the recorder has in hand or read from the
stored text (as an older spool's rows are at open)."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import pytest

from collector.db import migrate
from collector.db.shared import Db
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


def stored(db: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(session, revision, latest) of every coverage row; (session, revision, evaluation) of
    every verdict."""
    return (
        db.execute("SELECT session, revision, latest FROM coverage ORDER BY session, revision").fetchall(),
        db.execute(
            "SELECT session, revision, evaluation FROM verdicts ORDER BY session, revision, evaluation"
        ).fetchall(),
    )


def test_latest_marks_and_verdicts_whatever_order_revisions_come_in() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate.create_empty(db)
    made = {(c.session.key, c.session.revision): recorded(c, 5.0) for c in coverages()}
    plain = made[("plain-1", 1)]

    def save(*revisions: tuple[index.Indexed, dict[str, Any]]) -> int:
        db.execute("BEGIN")
        added = index.store(
            Db(db, "sqlite"), index.prepare([r for r, _ in revisions], [line for _, line in revisions])
        )
        db.execute("COMMIT")
        return added

    def revision(n: int, session: str = "plain-1") -> tuple[index.Indexed, dict[str, Any]]:
        (_, _, text, at), line = plain
        return (session, n, text, at), {**line, "session_id": session, "revision": n}

    def latest() -> list[tuple[str, int]]:
        return [(s, r) for s, r, mark in stored(db)[0] if mark]

    assert save(revision(3)) == 1
    assert save(revision(1), made[("empty", 1)]) == 2  # an earlier revision after a later one
    assert latest() == [("empty", 1), ("plain-1", 3)]
    assert save(revision(2, "new"), revision(1, "new")) == 2  # two of a new session together
    assert latest() == [("empty", 1), ("new", 2), ("plain-1", 3)]
    assert save(revision(4), revision(2)) == 2
    assert save(revision(2)) == 0  # recorded again: its verdicts replaced, not added to
    coverage, verdicts = stored(db)
    assert coverage == [
        ("empty", 1, 1),
        ("new", 1, 0),
        ("new", 2, 1),
        *[("plain-1", n, int(n == 4)) for n in (1, 2, 3, 4)],
    ]
    assert verdicts == [
        ("new", 1, "skill_omission"),
        ("new", 2, "skill_omission"),
        *[("plain-1", n, "skill_omission") for n in (1, 2, 3, 4)],
    ]
