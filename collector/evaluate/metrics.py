"""The evaluate stage's metrics: judge calls, tokens, spend, queue; it is the judge's observer."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.telemetry import SkillLabels


class EvaluateMetrics:
    """Judge calls and their cost; ``request`` / ``billed`` / ``spent`` make it a ``JudgeObserver``."""

    def __init__(self, registry: CollectorRegistry, skill_labels: SkillLabels | None = None) -> None:
        self.registry = registry
        self.skill_labels = skill_labels if skill_labels is not None else SkillLabels()
        r = registry
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
        self.judge_queue_capacity = Gauge(
            "skillgauge_judge_queue_capacity",
            "judge.max_queue: judge evaluations waiting or in flight at which new requests get backpressure.",
            registry=r,
        )
        self.judge_failures = Counter(
            "skillgauge_judge_failures",
            "Judge calls that found no judge (unreachable or without capacity, after the client's "
            "retries): the work waits and is tried again, by reason (timeout, rate_limited, "
            "overloaded, error).",
            ["reason"],
            registry=r,
        )
        self.judge_configured = Gauge(
            "skillgauge_judge_configured", "1 when a judge (API key or base URL) is configured.", registry=r
        )
        self.registry_body_mismatch = Counter(
            "skillgauge_skill_body_mismatch",
            "Loads whose traced body differs from the operator's registry copy (the trace wins), by skill.",
            ["skill"],
            registry=r,
        )

    def request(self, model: str, outcome: str, latency_s: float) -> None:
        self.judge_requests.labels(model, outcome).inc()
        self.judge_latency.labels(model).observe(latency_s)

    def billed(self, model: str, kind: str, tokens: int) -> None:
        if tokens:
            self.judge_tokens.labels(model, kind).inc(tokens)

    def spent(self, model: str, usd: float) -> None:
        if usd:
            self.judge_cost.labels(model).inc(usd)
