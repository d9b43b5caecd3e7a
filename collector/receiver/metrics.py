"""The receivers' metrics: requests answered, refused whole by reason; HTTP connections."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from collector.receiver.types import OnAnswer


class ReceiverMetrics:
    """Requests answered, by protocol, signal and outcome."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.requests = Counter(
            "skillgauge_requests",
            "OTLP export requests answered, by protocol, signal and outcome.",
            ["protocol", "signal", "outcome"],
            registry=r,
        )
        self.rejected_requests = Counter(
            "skillgauge_rejected_requests",
            "OTLP requests refused whole, by protocol, signal and reason "
            "(invalid, unsupported_media_type, too_large, backpressure, storage_error, unauthenticated, "
            "read_timeout, client_disconnected, not_found: a path or method the receiver does not serve).",
            ["protocol", "signal", "reason"],
            registry=r,
        )
        self.http_connections = Gauge(
            "skillgauge_http_connections",
            "OTLP/HTTP connections open now (at most receivers.otlp.http.max_connections).",
            registry=r,
        )
        self.http_connections_refused = Counter(
            "skillgauge_http_connections_refused",
            "OTLP/HTTP connections refused at accept because receivers.otlp.http.max_connections were open.",
            registry=r,
        )

    def answered(self, protocol: str) -> OnAnswer:
        """What a receiver of ``protocol`` calls with each answer it sends."""

        def on_answer(signal: str, outcome: str, reason: str) -> None:
            self.requests.labels(protocol, signal, outcome).inc()
            if reason:
                self.rejected_requests.labels(protocol, signal, reason).inc()

        return on_answer
