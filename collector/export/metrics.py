"""Prometheus metrics: every number an operator needs, with low-cardinality labels.

Labels never carry a session id, a score or free text.  Skill names are capped to the
skills seen in catalogs (and the operator's registry); anything else is ``other``, and
the cap itself is bounded, so a misbehaving agent cannot explode the series count.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from evaluators.evidence import Session, fold_skill_name
from evaluators.result import EvaluationResult

MAX_SKILL_LABELS = 200
OTHER = "other"


class SkillLabels:
    """Maps a skill name to a bounded label value."""

    def __init__(self, limit: int = MAX_SKILL_LABELS) -> None:
        self._known: set[str] = set()
        self._limit = limit

    def learn(self, names: list[str]) -> None:
        for name in names:
            if len(self._known) >= self._limit:
                return
            self._known.add(fold_skill_name(name))

    def __call__(self, name: str | None) -> str:
        folded = fold_skill_name(name or "")
        return folded if folded in self._known else OTHER


class Metrics:
    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.skill_labels = SkillLabels()
        self.received = Counter(
            "skillgauge_received_items",
            "Spans and log records received, by signal and protocol.",
            ["signal", "protocol"],
            registry=r,
        )
        self.rejected = Counter(
            "skillgauge_rejected_items",
            "Spans and log records not accepted, by signal and reason.",
            ["signal", "reason"],
            registry=r,
        )
        self.requests = Counter(
            "skillgauge_requests",
            "OTLP export requests answered, by protocol, signal and outcome.",
            ["protocol", "signal", "outcome"],
            registry=r,
        )
        self.rejected_requests = Counter(
            "skillgauge_rejected_requests",
            "OTLP requests refused whole, by protocol, signal and reason "
            "(invalid, unsupported_media_type, too_large, backpressure, storage_error, unauthenticated).",
            ["protocol", "signal", "reason"],
            registry=r,
        )
        self.status_rejected = Counter(
            "skillgauge_status_rejected_requests",
            "Status API requests refused, by endpoint (metrics, sessions) and reason (unauthenticated).",
            ["endpoint", "reason"],
            registry=r,
        )
        self.sessions_open = Gauge("skillgauge_sessions_open", "Sessions currently open.", registry=r)
        self.sessions_closed = Counter(
            "skillgauge_sessions_closed", "Sessions closed, by reason.", ["reason"], registry=r
        )
        self.sessions_reopened = Counter(
            "skillgauge_sessions_reopened", "Sessions reopened by late spans (a new revision).", registry=r
        )
        self.skill_loads = Counter(
            "skillgauge_skill_loads",
            "Skill loads detected, by framework, signal, status and skill.",
            ["framework", "signal", "status", "skill"],
            registry=r,
        )
        self.sessions_without_load = Counter(
            "skillgauge_sessions_without_skill_load",
            "Closed sessions with no skill load, by catalog state.",
            ["catalog_state"],
            registry=r,
        )
        self.sessions_evaluated = Counter(
            "skillgauge_sessions_evaluated",
            "Closed sessions evaluated, by framework, catalog state and content capture.",
            ["framework", "catalog_state", "content_capture"],
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
            "Evaluation results, by evaluation, status and reason.",
            ["evaluation", "status", "reason"],
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
        # The judge (filled in by evaluators' runner).
        self.judge_requests = Counter(
            "skillgauge_judge_requests",
            "Judge API calls, by model and outcome "
            "(ok, error, timeout, rate_limited, overloaded, unparseable).",
            ["model", "outcome"],
            registry=r,
        )
        self.judge_latency = Histogram(
            "skillgauge_judge_latency_seconds",
            "Judge API call latency, by model.",
            ["model"],
            buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
            registry=r,
        )
        self.judge_tokens = Counter(
            "skillgauge_judge_tokens",
            "Judge tokens billed, by model and kind (input, output, cache_read, cache_write).",
            ["model", "kind"],
            registry=r,
        )
        self.judge_cost = Counter(
            "skillgauge_judge_cost_usd", "Judge spend in US dollars, by model.", ["model"], registry=r
        )
        self.judge_reused = Counter(
            "skillgauge_judge_verdicts_reused",
            "Judge verdicts committed before a restart and reused instead of calling the judge again.",
            registry=r,
        )
        self.judge_queue = Gauge(
            "skillgauge_judge_queue_depth", "Judge evaluations waiting or in flight.", registry=r
        )
        self.registry_body_mismatch = Counter(
            "skillgauge_skill_body_mismatch",
            "Loads whose traced body differs from the operator's registry copy (the trace wins), by skill.",
            ["skill"],
            registry=r,
        )
        # Exports (evaluation spans / log records downstream).
        self.exported = Counter(
            "skillgauge_exported_results",
            "Results acknowledged by a downstream exporter.",
            ["exporter"],
            registry=r,
        )
        self.export_failures = Counter(
            "skillgauge_export_failures",
            "Failed export attempts, by exporter and reason.",
            ["exporter", "reason"],
            registry=r,
        )
        self.export_backlog = Gauge(
            "skillgauge_export_backlog",
            "Results waiting to be exported, by exporter.",
            ["exporter"],
            registry=r,
        )
        self.export_dropped = Counter(
            "skillgauge_export_dropped",
            "Results given up on, by exporter and reason (queue_full, "
            "rejected: the downstream refused them for good, partially_rejected).",
            ["exporter", "reason"],
            registry=r,
        )
        self.export_lag = Histogram(
            "skillgauge_export_lag_seconds",
            "Seconds from a result being recorded to its downstream acknowledgement, by exporter.",
            ["exporter"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800, 3600),
            registry=r,
        )
        self.spool_bytes = Gauge("skillgauge_spool_bytes", "Size of the spool on disk.", registry=r)
        self.storage_write_failures = Counter(
            "skillgauge_storage_write_failures",
            "Spool writes that failed for want of storage (a full disk, an I/O error), by write "
            "(request: refused as retryable; write: session records, results, outbox).",
            ["write"],
            registry=r,
        )
        self.spool_quarantined = Counter(
            "skillgauge_spool_quarantined",
            "Spooled requests set aside at a restart (copied to <storage.path>/quarantine/), by "
            "reason (unreadable: bytes missing or torn; undecodable: not a valid OTLP request).",
            ["reason"],
            registry=r,
        )
        for write in ("request", "write"):
            self.storage_write_failures.labels(write)
        for reason in ("unreadable", "undecodable"):
            self.spool_quarantined.labels(reason)
        self.pending_requests = Gauge(
            "skillgauge_pending_requests",
            "Acknowledged trace requests waiting, by stage (assembler; detection: sent to the "
            "detection worker, not yet read by it).  At sessions.max_pending_requests, backpressure.",
            ["stage"],
            registry=r,
        )
        self.judge_configured = Gauge(
            "skillgauge_judge_configured", "1 when a judge (API key or base URL) is configured.", registry=r
        )

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered: every closed session counts a dozen series,
        and ``labels`` validates and locks on each call.  Label values are bounded by design."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def session_closed(self, reason: str) -> None:
        self._child(self.sessions_closed, reason).inc()

    def session_evaluated(self, session: Session, results: list[EvaluationResult], lag: float) -> None:
        child = self._child
        self.skill_labels.learn([e.name for e in session.catalog.skills.values()])
        child(
            self.sessions_evaluated, session.framework, session.catalog.state, session.content_capture
        ).inc()
        for load in session.skill_loads:
            child(
                self.skill_loads, session.framework, load.signal, load.status, self.skill_labels(load.skill)
            ).inc()
        if not session.skill_loads:
            child(self.sessions_without_load, session.catalog.state).inc()
        if session.expected_skills:
            self.sessions_with_expectations.inc()
        now = time.time()
        missed = False
        for result in results:
            child(self.evaluations, result.evaluation, result.status, result.reason).inc()
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
