"""Coverage metrics counted for a batch of recorded sessions are what counting them one by
one gives: every series, every value, in the same order."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from collector.state.metrics import CoverageMetrics
from evaluators.evidence import Catalog, CatalogEntry, Session, SkillLoad
from evaluators.result import EvaluationResult, judged, unjudged


def _sessions() -> list[tuple[Session, list[EvaluationResult], float]]:
    evaluated = []
    for i in range(12):
        catalog = Catalog(limit=2)
        if i % 3:
            names = ["Release_Notes", "csv-cleanup", f"extra-{i}"]  # the third is past the limit
            catalog.advertise([CatalogEntry(name, "d") for name in names], "available_skills_xml")
        loads = [
            SkillLoad("release-notes", "loaded" if i % 2 else "failed", "skill_tool", "00" * 8, "00" * 16),
            SkillLoad(f"unknown-{i}", "denied", "file_read", "01" * 8, "00" * 16),
        ][: i % 3]
        session = Session(
            f"s{i}",
            framework="strands" if i % 2 else "google_adk",
            catalog=catalog,
            skill_loads=loads,
            expected_skills=["release-notes"] if i % 4 == 0 else [],
            tenant="acme" if i % 5 == 0 else "",
        )
        results = [
            unjudged("skill_omission", session, "not_applicable", "skill_loaded", "x"),
            judged(
                "skill_selection_accuracy",
                session,
                score=1.0 if i % 2 else 0.0,
                passed=bool(i % 2),
                label="yes" if i % 2 else "no",
                reason="judged",
                skill="release-notes",
            ),
        ]
        if session.expected_skills:
            passed = bool(i % 8)
            results.append(
                judged(
                    "skill_invoked",
                    session,
                    score=float(passed),
                    passed=passed,
                    label="loaded" if passed else "not_loaded",
                    reason="loaded" if passed else "not_invoked",
                    skill="release-notes",
                )
            )
        evaluated.append((session, results, 0.01 * i))
    return evaluated


def _exposed(metrics: CoverageMetrics) -> str:
    """The exposition without what is a time (when a series was made, a judged row's time)."""
    text = generate_latest(metrics.registry).decode()
    times = ("_created", "skillgauge_last_evaluation_timestamp_seconds{")
    return "\n".join(line for line in text.splitlines() if not any(t in line for t in times))


def _total(text: str, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` with ``labels`` (among others)."""
    total = 0.0
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        series, _, rest = head.partition("{")
        if series == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += float(value)
    return total


def test_a_batch_counts_what_its_sessions_count_one_by_one() -> None:
    one_by_one = CoverageMetrics(CollectorRegistry())
    for session, results, lag in _sessions():
        one_by_one.session_evaluated(session, results, lag)
    together = CoverageMetrics(CollectorRegistry())
    evaluated = _sessions()
    together.sessions_evaluated_together(evaluated[:5])
    together.sessions_evaluated_together(evaluated[5:])
    text = _exposed(together)
    assert text == _exposed(one_by_one)
    assert _total(text, "skillgauge_sessions_evaluated_total", framework="strands", tenant="") == 5
    assert _total(text, "skillgauge_sessions_evaluated_total", framework="google_adk", tenant="acme") == 2
    assert _total(text, "skillgauge_sessions_catalog_truncated_total") == 8
    assert _total(text, "skillgauge_catalog_entries_not_kept_total") == 8
    assert _total(text, "skillgauge_sessions_with_expectations_total") == 3
    assert _total(text, "skillgauge_expected_skill_misses_total", reason="not_invoked") == 2
    assert _total(text, "skillgauge_sessions_with_missed_expectations_total") == 2
    assert (
        _total(
            text,
            "skillgauge_evaluation_verdicts_total",
            evaluation="skill_selection_accuracy",
            verdict="pass",
        )
        == 6
    )
    assert _total(text, "skillgauge_skill_loads_total", signal="file_read", skill="other") == 4
    assert _total(text, "skillgauge_evaluation_lag_seconds_count") == 12
    assert (
        _total(
            generate_latest(together.registry).decode(),
            "skillgauge_last_evaluation_timestamp_seconds",
            evaluation="skill_selection_accuracy",
        )
        > 0
    )
