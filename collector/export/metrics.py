"""The exporters' metrics: results exported, failures, backlog, drops, lag."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ExportMetrics:
    """Exports downstream, by exporter."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
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
