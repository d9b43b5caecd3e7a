"""What every recorded session account adds up to: loads, evaluations, scores, expectations."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.telemetry import Series, SkillLabels
from evaluators.evidence import Session
from evaluators.result import EvaluationResult


class CoverageMetrics:
    """Coverage metrics, counted once per recorded revision.  The ``tenant`` label is the
    session's tenant: one the operator configured in ``auth`` (bounded), or ""."""

    def __init__(self, registry: CollectorRegistry, skill_labels: SkillLabels | None = None) -> None:
        self.registry = registry
        self.skill_labels = skill_labels if skill_labels is not None else SkillLabels()
        self._series = Series()
        r = registry
        self.skill_loads = Counter(
            "skillgauge_skill_loads",
            "Skill loads detected, by framework, signal, status, skill and tenant.",
            ["framework", "signal", "status", "skill", "tenant"],
            registry=r,
        )
        self.sessions_without_load = Counter(
            "skillgauge_sessions_without_skill_load",
            "Closed sessions with no skill load, by catalog state and tenant.",
            ["catalog_state", "tenant"],
            registry=r,
        )
        self.sessions_evaluated = Counter(
            "skillgauge_sessions_evaluated",
            "Closed sessions evaluated, by framework, catalog state, content capture and tenant.",
            ["framework", "catalog_state", "content_capture", "tenant"],
            registry=r,
        )
        self.sessions_with_expectations = Counter(
            "skillgauge_sessions_with_expectations",
            "Closed sessions with at least one expected skill.",
            registry=r,
        )
        self.expected_checks = Counter(
            "skillgauge_expected_skill_checks", "Expected-skill checks, by skill.", ["skill"], registry=r
        )
        self.expected_misses = Counter(
            "skillgauge_expected_skill_misses",
            "Expected skills not loaded, by skill and reason.",
            ["skill", "reason"],
            registry=r,
        )
        self.evaluations = Counter(
            "skillgauge_evaluations",
            "Evaluation results, by evaluation, status, reason and tenant.",
            ["evaluation", "status", "reason", "tenant"],
            registry=r,
        )
        self.scores = Histogram(
            "skillgauge_evaluation_score",
            "Scores of judged results, by evaluation, skill (capped) and framework.",
            ["evaluation", "skill", "framework"],
            buckets=(0.0, 0.25, 0.5, 0.75, 1.0),
            registry=r,
        )
        self.verdicts = Counter(
            "skillgauge_evaluation_verdicts",
            "Judged results by verdict (pass / fail), evaluation, skill (capped) and framework.",
            ["evaluation", "skill", "framework", "verdict"],
            registry=r,
        )
        self.sessions_with_missed_expectations = Counter(
            "skillgauge_sessions_with_missed_expectations",
            "Closed sessions in which at least one expected skill was not loaded.",
            registry=r,
        )
        self.catalog_entries_dropped = Counter(
            "skillgauge_catalog_entries_not_kept",
            "Catalog entries advertised but not kept whole (past sessions.max_catalog_entries, "
            "a name too long, a description cut), summed over closed sessions.",
            registry=r,
        )
        self.sessions_catalog_truncated = Counter(
            "skillgauge_sessions_catalog_truncated",
            "Closed sessions whose catalog was cut (coverage line: catalog.truncated).",
            registry=r,
        )
        self.last_success = Gauge(
            "skillgauge_last_evaluation_timestamp_seconds",
            "Unix time of the last judged result, by evaluation (a dead man's switch).",
            ["evaluation"],
            registry=r,
        )
        self.evaluation_lag = Histogram(
            "skillgauge_evaluation_lag_seconds",
            "Seconds from session close to its results being recorded.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )

    def session_evaluated(self, session: Session, results: list[EvaluationResult], lag: float) -> None:
        self.sessions_evaluated_together([(session, results, lag)])

    def sessions_evaluated_together(
        self, evaluated: Iterable[tuple[Session, list[EvaluationResult], float]]
    ) -> None:
        """Count recorded revisions: (session, its results, seconds from close to record).
        The counters' increments are summed over ``evaluated`` first and each series is
        incremented once (a batch of sessions shares most of its series); what a scrape
        reads after the call is what one call per session would have left."""
        series = self._series
        labels = self.skill_labels
        counts: dict[tuple[Any, tuple[str, ...]], int] = {}
        plain: dict[Any, float] = {}  # counters without labels

        def count(metric: Any, *values: str) -> None:
            key = (metric, values)
            counts[key] = counts.get(key, 0) + 1

        now = time.time()
        for session, results, lag in evaluated:
            catalog = session.catalog
            if catalog.skills:
                labels.learn_folded(catalog.skills)  # its keys: the skills' folded names
            tenant = session.tenant  # one of the operator's configured tenants, or ""
            framework = session.framework
            count(self.sessions_evaluated, framework, catalog.state, session.content_capture, tenant)
            for load in session.skill_loads:
                count(self.skill_loads, framework, load.signal, load.status, labels(load.skill), tenant)
            if not session.skill_loads:
                count(self.sessions_without_load, catalog.state, tenant)
            if catalog.truncated:
                plain[self.sessions_catalog_truncated] = plain.get(self.sessions_catalog_truncated, 0) + 1
                dropped = self.catalog_entries_dropped
                plain[dropped] = plain.get(dropped, 0) + catalog.truncated
            if session.expected_skills:
                plain[self.sessions_with_expectations] = plain.get(self.sessions_with_expectations, 0) + 1
            missed = False
            for result in results:
                count(self.evaluations, result.evaluation, result.status, result.reason, tenant)
                if result.status == "judged" and result.score is not None:
                    skill = labels(result.skill) if result.skill else "none"
                    result_framework = result.framework or framework
                    series(self.scores, result.evaluation, skill, result_framework).observe(result.score)
                    verdict = "pass" if result.passed else "fail"
                    count(self.verdicts, result.evaluation, skill, result_framework, verdict)
                    series(self.last_success, result.evaluation).set(now)
                if result.evaluation == "skill_invoked":
                    skill = labels(result.skill)
                    count(self.expected_checks, skill)
                    if result.passed is False:
                        missed = True
                        count(self.expected_misses, skill, result.reason)
            if missed:
                missed_key = self.sessions_with_missed_expectations
                plain[missed_key] = plain.get(missed_key, 0) + 1
            self.evaluation_lag.observe(lag)
        for (metric, values), n in counts.items():
            series(metric, *values).inc(n)
        for metric, amount in plain.items():
            metric.inc(amount)
