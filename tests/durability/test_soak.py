"""Soak, bounded in time: sustained ingest above the limits gets backpressure answers, memory
stays flat, and every span is accounted for (acknowledged and evaluated, or refused)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import grpc
from durability.test_crash import session_requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from perf.bench import rekey
from support import EXPORT_TRACES, Server, metric_value

SECONDS = 12.0


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fresh_session(body: bytes, session: str, n: int) -> bytes:
    """The same recorded session under a new session id and new trace ids."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for rs in request.resource_spans:
        for kv in rs.resource.attributes:
            if kv.key == "session.id":
                kv.value.string_value = session
        for ss in rs.scope_spans:
            for span in ss.spans:
                rekey(span, session, (n + 1) << 32)  # not recorded_session's salts (n + 1)
    return request.SerializeToString()


def test_sustained_overload_gets_backpressure_flat_memory_and_no_lost_span(tmp_path: Path) -> None:
    server = Server(tmp_path, {"sessions": {"idle_timeout": "0.3s", "check_interval": "0.1s", "max_open": 8}})
    templates = session_requests()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    export = channel.unary_unary(EXPORT_TRACES, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    acked_spans = refused = sent = 0
    retry_hints: set[str] = set()
    samples: list[tuple[float, int]] = []
    start = time.monotonic()
    n = 0
    try:
        while time.monotonic() - start < SECONDS:
            _, body, spans = templates[n % len(templates)]
            fresh = fresh_session(body, f"soak-{n:05d}", n)
            sent += 1
            try:
                export(fresh, timeout=10)
                acked_spans += spans
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNAVAILABLE, err
                retry_hints |= {k for k, _ in err.trailing_metadata() or ()}
                refused += 1
            n += 1
            if n % 20 == 0:
                samples.append((time.monotonic() - start, rss(server.proc.pid)))
        metrics = server.metrics()
    finally:
        channel.close()
        assert server.stop() == 0

    assert refused > 0 and acked_spans > 0, (refused, acked_spans)
    assert "google.rpc.retryinfo-bin" in retry_hints
    assert metric_value(metrics, "skillgauge_rejected_requests_total", protocol="grpc", signal="traces",
                        reason="backpressure") == refused
    # Every acknowledged span reached a session that was evaluated (shutdown closes the rest).
    with sqlite3.connect(tmp_path / "data" / "skillgauge.sqlite") as db:
        latest = db.execute("SELECT record FROM coverage c WHERE revision = "
                            "(SELECT MAX(revision) FROM coverage WHERE session = c.session)").fetchall()
        evaluated = sum(json.loads(r)["spans"] for (r,) in latest)
    assert evaluated == acked_spans
    # Memory is flat: the last third of the run grows by less than 15 % over the first third.
    settled = [m for t, m in samples if SECONDS / 3 <= t < 2 * SECONDS / 3]
    late = [m for t, m in samples if t >= 2 * SECONDS / 3]
    assert settled and late
    assert max(late) < 1.15 * max(settled), (max(settled), max(late))
