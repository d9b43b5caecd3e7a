"""The spool stage's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class SpoolMetrics:
    """The store's size on disk."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
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
