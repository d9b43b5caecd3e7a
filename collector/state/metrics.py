"""What every recorded session account adds up to: loads, evaluations, scores, expectations."""

from __future__ import annotations

import time

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
        child = self._series
        self.skill_labels.learn([e.name for e in session.catalog.skills.values()])
        tenant = session.tenant  # one of the operator's configured tenants, or ""
        child(
            self.sessions_evaluated, session.framework, session.catalog.state, session.content_capture, tenant
        ).inc()
        for load in session.skill_loads:
            child(
                self.skill_loads,
                session.framework,
                load.signal,
                load.status,
                self.skill_labels(load.skill),
                tenant,
            ).inc()
        if not session.skill_loads:
            child(self.sessions_without_load, session.catalog.state, tenant).inc()
        if session.catalog.truncated:
            self.sessions_catalog_truncated.inc()
            self.catalog_entries_dropped.inc(session.catalog.truncated)
        if session.expected_skills:
            self.sessions_with_expectations.inc()
        now = time.time()
        missed = False
        for result in results:
            child(self.evaluations, result.evaluation, result.status, result.reason, tenant).inc()
            if result.status == "judged" and result.score is not None:
                skill = self.skill_labels(result.skill) if result.skill else "none"
                framework = result.framework or session.framework
                child(self.scores, result.evaluation, skill, framework).observe(result.score)
                verdict = "pass" if result.passed else "fail"
                child(self.verdicts, result.evaluation, skill, framework, verdict).inc()
                child(self.last_success, result.evaluation).set(now)
            if result.evaluation == "skill_invoked":
                skill = self.skill_labels(result.skill)
                child(self.expected_checks, skill).inc()
                if result.passed is False:
                    missed = True
                    child(self.expected_misses, skill, result.reason).inc()
        if missed:
            self.sessions_with_missed_expectations.inc()
        self.evaluation_lag.observe(lag)
