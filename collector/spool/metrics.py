"""The spool stage's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge


class SpoolMetrics:
    """The store's size on disk."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.spool_bytes = Gauge("skillgauge_spool_bytes", "Size of the spool on disk.", registry=r)
