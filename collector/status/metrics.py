"""The status extension's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class StatusMetrics:
    """Status API requests refused; its connections."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.status_rejected = Counter(
            "skillgauge_status_rejected_requests",
            "Status API requests refused, by endpoint (metrics, sessions, ui) and reason (unauthenticated; not_loopback: no auth, not sessions_open, a remote client; login_failed, login_throttled, foreign_origin: page logins).",
            ["endpoint", "reason"],
            registry=r,
        )
        self.connections = Gauge(
            "skillgauge_status_connections",
            "Status API connections open now (at most status.max_connections).",
            registry=r,
        )
        self.connections_refused = Counter(
            "skillgauge_status_connections_refused",
            "Status API connections refused at accept because status.max_connections were open.",
            registry=r,
        )
