"""The status extension's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class StatusMetrics:
    """Status API requests refused."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.status_rejected = Counter(
            "skillgauge_status_rejected_requests",
            "Status API requests refused, by endpoint (metrics, sessions, ui) and reason (unauthenticated; not_loopback: no auth, not sessions_open, a remote client).",
            ["endpoint", "reason"],
            registry=r,
        )
