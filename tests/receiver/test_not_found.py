"""Requests to a path or method the receivers do not serve: refused as before, and counted in
``skillgauge_rejected_requests_total{reason="not_found"}`` and logged once per interval with
the path and a hint, against a running ``skillgauge serve``."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from support import Server, metric_value

from collector.receiver.not_found import hint


def _send(srv: Server, path: str, method: str = "POST") -> tuple[int, str]:
    req = urllib.request.Request(
        f"{srv.http_url}{path}", b"{}" if method == "POST" else None, {"Content-Type": "application/json"}, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_a_post_to_v1_trace_is_counted_as_not_found_and_logged_once_with_a_hint(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    try:
        for _ in range(3):
            code, body = _send(srv, "/v1/trace")
            assert code == 404
            assert "did you mean /v1/traces" in body
        code, body = _send(srv, "/v1/traces", "GET")
        assert code == 405 and "/v1/traces takes POST, not GET" in body
        code, _ = _send(srv, "/v1/metrics")
        assert code == 404
        text = srv.metrics()
        assert metric_value(
            text, "skillgauge_rejected_requests_total", protocol="http", signal="traces", reason="not_found"
        ) == 4
        assert metric_value(
            text, "skillgauge_rejected_requests_total", protocol="http", signal="metrics", reason="not_found"
        ) == 1
        # One line for each method and path; the repeats fall in the same interval and are
        # counted only.
        lines = [line for line in srv.log().splitlines() if "no such endpoint" in line]
        assert len(lines) == 3, lines
        assert "http receiver: no such endpoint POST '/v1/trace' - did you mean /v1/traces" in lines[0]
        assert "GET '/v1/traces' - /v1/traces takes POST, not GET" in lines[1]
        assert "POST '/v1/metrics' - skillgauge takes traces and logs, not metrics" in lines[2]
        # The receiver still takes what it serves.
        assert _send(srv, "/v1/traces")[0] == 200
    finally:
        srv.stop()


def test_a_grpc_method_nobody_serves_is_unimplemented_and_counted(tmp_path: Path) -> None:
    srv = Server(tmp_path)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.metrics.v1.MetricsService/Export")
            with pytest.raises(grpc.RpcError) as refused:
                export(b"", timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "not metrics" in (refused.value.details() or "")
        assert metric_value(
            srv.metrics(), "skillgauge_rejected_requests_total", protocol="grpc", signal="metrics", reason="not_found"
        ) == 1
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("path", "method", "said"),
    [
        ("/v1/trace", "POST", "did you mean /v1/traces"),
        ("/v1/log", "POST", "did you mean /v1/logs"),
        ("/", "POST", "the receiver serves /v1/traces and /v1/logs; an exporter's endpoint must name the full path"),
        ("/v1/logs", "PUT", "/v1/logs takes POST, not PUT"),
        ("/opentelemetry.proto.collector.trace.v1.TraceService/Exprot", "gRPC", "did you mean /opentelemetry.proto.collector.trace.v1.TraceService/Export"),
    ],
)
def test_hints(path: str, method: str, said: str) -> None:
    assert hint(path, method) == said
