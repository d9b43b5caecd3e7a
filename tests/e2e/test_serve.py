"""End to end: real OpenTelemetry SDK exporters -> a running ``skillgauge serve`` -> results."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import sys
import urllib.request
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, metric_value, readable_spans, trace_requests, wait_for

sys.path.insert(0, str(FRAMEWORKS))
from capture import otlp_json

SESSION = "strands-right_skill-0001"
EXPECT = {"expectations": [{"when": {"user_message": "release notes"}, "expect": ["release-notes"]}]}


def ended(process: Path) -> bool:
    """A ``/proc/<pid>`` that is gone, or a zombie its parent (dead too) has not reaped."""
    return not process.exists() or "zombie" in (process / "status").read_text()


def _split_request(request: ExportTraceServiceRequest, start: int, stop: int) -> ExportTraceServiceRequest:
    part = ExportTraceServiceRequest()
    part.CopyFrom(request)
    spans = part.resource_spans[0].scope_spans[0].spans
    kept = list(spans)[start:stop]
    del spans[:]
    spans.extend(kept)
    return part


@pytest.fixture
def expecting_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    srv = Server(tmp_path, EXPECT)
    yield srv
    srv.stop()


def test_strands_session_over_grpc_http_and_json_is_evaluated(expecting_server: Server) -> None:
    srv = expecting_server
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    spans = readable_spans(request)
    assert len(spans) == 6

    grpc = GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
    assert grpc.export(spans[:2]) == SpanExportResult.SUCCESS
    http = HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
    assert http.export(spans[2:4]) == SpanExportResult.SUCCESS
    body = otlp_json(_split_request(request, 4, 6)).encode()
    post = urllib.request.Request(f"{srv.http_url}/v1/traces", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(post, timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/json")
        assert json.loads(resp.read()) == {}

    status, open_view = srv.get_json(f"/v1/sessions/{SESSION}")
    assert status == 200 and open_view["open"]["spans"] == 6

    def closed() -> dict | None:  # type: ignore[type-arg]
        code, body = srv.get_json(f"/v1/sessions/{SESSION}")
        return body if code == 200 and "revisions" in body else None

    body = wait_for(closed, timeout=10)
    records = body["revisions"][0]["records"]
    coverage = records[-1]["coverage"]
    assert coverage["close_reason"] == "idle_timeout"
    assert coverage["spans"] == 6
    assert coverage["framework"] == "strands"
    assert coverage["catalog"]["state"] == "advertised"
    load_span = request.resource_spans[0].scope_spans[0].spans[
        [s.name for s in request.resource_spans[0].scope_spans[0].spans].index("execute_tool skills")
    ]
    assert coverage["skill_loads"] == [
        {
            "skill": "release-notes",
            "status": "loaded",
            "signal": "skill_tool",
            "has_body": True,
            "span_id": load_span.span_id.hex(),
            "trace_id": load_span.trace_id.hex(),
        }
    ]
    (result,) = [r for r in records[:-1] if r["evaluation"] == "skill_invoked"]
    assert (result["status"], result["passed"], result["score"], result["reason"]) == (
        "judged",
        True,
        1.0,
        "loaded",
    )
    assert result["span_id"] == coverage["skill_loads"][0]["span_id"]

    metrics = srv.metrics()
    assert metric_value(metrics, "skillgauge_received_items_total", protocol="grpc", signal="traces") == 2
    assert metric_value(metrics, "skillgauge_received_items_total", protocol="http", signal="traces") == 4
    assert metric_value(metrics, "skillgauge_sessions_closed_total", reason="idle_timeout") == 1
    assert (
        metric_value(
            metrics,
            "skillgauge_skill_loads_total",
            framework="strands",
            signal="skill_tool",
            status="loaded",
            skill="release-notes",
        )
        == 1
    )
    assert (
        metric_value(
            metrics,
            "skillgauge_evaluations_total",
            evaluation="skill_invoked",
            status="judged",
            reason="loaded",
        )
        == 1
    )
    assert metric_value(metrics, "skillgauge_sessions_open") == 0
    # No judge configured: every judge evaluation is reported as skipped, never as a pass.
    judge_rows = [r for r in records[:-1] if r["evaluation"] != "skill_invoked"]
    assert all(r["passed"] is None and r["status"] in ("skipped", "not_applicable") for r in judge_rows)
    assert {r["reason"] for r in judge_rows if r["status"] == "skipped"} == {"no_judge_configured"}


def test_startup_log_names_every_listener(server: Server) -> None:
    log = server.log()
    for port in (server.grpc_port, server.http_port, server.status_port):
        assert f"127.0.0.1:{port}" in log
    assert "judge: NOT configured" in log
    assert "sessions: keys session.id" in log or "sessions: keys span:session.id" in log
    # Only skillgauge's own lines: the libraries it starts (Alembic migrating the store at
    # every start, say) say nothing at INFO.
    loggers = {line.split()[3].rstrip(":") for line in log.splitlines() if line[:2] == "20"}
    assert loggers == {"skillgauge"}, log


def test_startup_log_names_the_judge_budget_and_session_cap(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"judge": {"base_url": "http://127.0.0.1:9"}})
    try:
        line = next(line for line in srv.log().splitlines() if "judge: " in line)
    finally:
        srv.stop()
    assert "provider anthropic, model claude-sonnet-5-5 via http://127.0.0.1:9" in line
    assert "budget usd_per_day 50" in line
    assert "at most 2000000 input tokens a session" in line


def test_startup_log_names_a_cloud_providers_model_and_endpoint(tmp_path: Path) -> None:
    judge = {"provider": "bedrock", "aws_region": "eu-west-1", "budget": {"usd_per_day": 20}}
    srv = Server(tmp_path, {"judge": judge})
    try:
        line = next(line for line in srv.log().splitlines() if "judge: " in line)
    finally:
        srv.stop()
    assert "provider bedrock, model global.anthropic.claude-sonnet-5-5 via bedrock-runtime.eu-west-1" in line
    assert "budget usd_per_day 20" in line


def test_sigterm_closes_and_evaluates_open_sessions(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"sessions": {"idle_timeout": "1h"}})
    (request,) = trace_requests(FRAMEWORKS / "strands" / "no_skill.traces.jsonl")
    exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
    assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.stop() == 0
    log = srv.log()
    assert "closed and evaluated 1 open sessions" in log
    assert "skillgauge stopped" in log


def test_at_sigterm_a_harness_s_housekeeping_traces_are_dropped_not_counted_as_evaluated(tmp_path: Path) -> None:
    # OpenCode's own spans (config, sql, plugins) in traces of their own, beside its session's
    # trace: at shutdown they close like sessions and are dropped, and the log says so apart.
    srv = Server(tmp_path, {"sessions": {"idle_timeout": "1h"}})
    lines = (FRAMEWORKS / "opencode" / "right_skill.traces.jsonl").read_text().splitlines()
    for line in lines:
        req = urllib.request.Request(f"{srv.http_url}/v1/traces", line.encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    spans = [s for r in trace_requests(FRAMEWORKS / "opencode" / "right_skill.traces.jsonl")
             for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    keyed = {s.trace_id for s in spans if any(kv.key == "session.id" for kv in s.attributes)}
    housekeeping = {s.trace_id for s in spans} - keyed
    assert len(keyed) == 1 and housekeeping
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.stop() == 0
    log = srv.log()
    assert f"closed and evaluated 1 open sessions; dropped {len(housekeeping)} traces with nothing to evaluate" in log


def test_unknown_session_says_why(server: Server) -> None:
    status, body = server.get_json("/v1/sessions/nope")
    assert status == 404
    assert "unknown session" in body["why_no_results"]


def test_health_endpoints(server: Server) -> None:
    assert server.get_json("/healthz") == (200, {"status": "ok"})
    code, body = server.get_json("/readyz")
    assert code == 200 and body["status"] == "ready"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still running."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_serve_is_one_process_that_answers_for_open_sessions_and_evaluates_them_at_sigterm(
    tmp_path: Path,
) -> None:
    srv = Server(tmp_path, {"sessions": {"idle_timeout": "1h"}})
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    session_id = next(
        kv.value.string_value
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
        for kv in span.attributes
        if kv.key == "session.id"
    )
    exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
    assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS
    status, body = srv.get_json(f"/v1/sessions/{session_id}")
    assert status == 200 and body["open"]["skill_loads"] == 1, body
    assert children(srv.proc.pid) == []  # no detection or judge process beside it
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.stop() == 0
    assert "closed and evaluated 1 open sessions" in srv.log()
    with sqlite3.connect(tmp_path / "data" / "skillgauge.sqlite") as db:
        (record,) = db.execute("SELECT record FROM coverage WHERE session = ?", (session_id,)).fetchone()
    coverage = json.loads(record)
    assert coverage["close_reason"] == "shutdown"
    assert [load["status"] for load in coverage["skill_loads"]] == ["loaded"]


def test_serve_calls_the_judge_and_counts_on_metrics(tmp_path: Path) -> None:
    fake = FakeAnthropic().start()
    try:
        judge = {"base_url": fake.base_url, "api_key": "test"}
        srv = Server(tmp_path, {"sessions": {"idle_timeout": "1s", "check_interval": "0.2s"}, "judge": judge})
        (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
        exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
        assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS
        wait_for(
            lambda: metric_value(srv.metrics(), "skillgauge_judge_requests_total", outcome="ok") >= 2, 30
        )
        assert len(fake.requests) >= 2
        assert children(srv.proc.pid) == []
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.stop() == 0
    finally:
        fake.stop()
    with sqlite3.connect(tmp_path / "data" / "skillgauge.sqlite") as db:
        rows = [json.loads(r) for (r,) in db.execute("SELECT record FROM results").fetchall()]
    judged = [r for r in rows if r["judge"] is not None]
    assert judged and all(r["status"] == "judged" for r in judged)


def test_a_port_in_use_stops_start_up_cleanly_and_names_the_fix(tmp_path: Path) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    try:
        port = held.getsockname()[1]
        srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"endpoint": f"127.0.0.1:{port}"}}}}, wait=False)
        assert srv.proc.wait(timeout=30) == 1
    finally:
        held.close()
    log = srv.log()
    assert f"receivers.otlp.http.endpoint: cannot listen on 127.0.0.1:{port}" in log
    assert "another process listens on that port" in log
    assert "Traceback" not in log and "never awaited" not in log
    srv.stop()
