"""A request sent again (an exporter retrying after a timeout) or overlapping an earlier one,
to a real ``skillgauge serve`` over gRPC and HTTP: each span is counted once, detected once
and judged once, also when the copy is replayed after a kill -9."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropic
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from perf.bench import recorded_session as session_request
from shared_tables import SharedTables, Tables
from support import Server, export_grpc, metric_value, wait_for

SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"


def spans_of(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def first_part(request: ExportTraceServiceRequest, keep: int) -> ExportTraceServiceRequest:
    out = ExportTraceServiceRequest()
    out.CopyFrom(request)
    del out.resource_spans[keep:]
    return out


def send_http(server: Server, body: bytes) -> None:
    request = urllib.request.Request(
        f"{server.http_url}/v1/traces", body, {"Content-Type": "application/x-protobuf"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200


def coverage(db: Tables) -> dict[str, dict[str, Any]]:
    return {s: json.loads(r) for s, r in db.rows("SELECT session, record FROM coverage")}


def config(fake: FakeAnthropic, idle: str) -> dict[str, Any]:
    return {
        "sessions": {"idle_timeout": idle, "check_interval": "0.1s"},
        "judge": {"base_url": fake.base_url, "api_key": "test"},
        "skills": {"paths": [str(SKILLS)]},
        "evaluators": {"skill_omission": {"sampling": 100}},
    }


def same_but_id(record: dict[str, Any], other: dict[str, Any]) -> bool:
    """Two coverage lines alike but for the session id, the close time, judge figures
    (latency) and trace ids (each session has its own trace: ``own_trace``)."""

    def plain(r: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in r.items() if k not in ("session_id", "closed_at", "judge", "results")}
        return json.loads(re.sub(r'"trace_id": "[0-9a-f]{32}"', '"trace_id": ""', json.dumps(kept)))

    return plain(record) == plain(other)


def own_trace(request: ExportTraceServiceRequest, n: int) -> ExportTraceServiceRequest:
    """``request``'s spans in a trace of their own (the recording's, its last byte XOR ``n``):
    the sessions of one test are distinct runs, not one trace whose spans each claims."""
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.trace_id = span.trace_id[:-1] + bytes([span.trace_id[-1] ^ n])
    return request


def test_the_same_request_twice_over_grpc_and_http_counts_and_judges_once(tmp_path: Path, shared: SharedTables) -> None:
    fake = FakeAnthropic().start()
    server = Server(tmp_path, shared.config(config(fake, "2s")))
    db = shared.at(tmp_path / "data")
    names = ("once", "twice-grpc", "twice-http", "overlap")
    sessions = {name: own_trace(session_request(1, name), n) for n, name in enumerate(names)}
    try:
        export_grpc(server, sessions["once"].SerializeToString())
        for send, name in ((export_grpc, "twice-grpc"), (send_http, "twice-http")):
            body = sessions[name].SerializeToString()
            send(server, body)
            send(server, body)  # the exporter timed out waiting and sent it again
        whole = sessions["overlap"]
        send_http(server, first_part(whole, spans_of(whole) // 2).SerializeToString())
        export_grpc(server, whole.SerializeToString())  # overlaps the first half
        expected = spans_of(whole)
        for name in names:
            status, view = server.get_json(f"/v1/sessions/{name}")
            assert status == 200 and view["open"]["spans"] == expected, (name, view)
        wait_for(lambda: len(coverage(db)) == len(names), timeout=60, interval=0.2)
        metrics = server.metrics()
    finally:
        server.stop()
        fake.stop()
    lines = coverage(db)
    assert {name: line["spans"] for name, line in lines.items()} == dict.fromkeys(names, expected)
    assert all(line["revision"] == 1 for line in lines.values())
    once = lines["once"]
    assert once["skill_loads"], "the recording loads no skill: the test proves nothing"
    for name in names[1:]:
        assert same_but_id(lines[name], once), name  # loads not doubled, the same rows
    judged = [r for line in lines.values() for r in line["results"] if r["judge"] is not None]
    per_session = len([r for r in once["results"] if r["judge"] is not None])
    assert per_session and len(judged) == per_session * len(names)
    assert len(fake.requests) == len(judged)  # one judge call per evaluation
    resent = 2 * expected + expected // 2  # two whole copies and the overlapping half
    assert metric_value(metrics, "skillgauge_duplicate_items_total", signal="traces") == resent
    assert metric_value(metrics, "skillgauge_sessions_reopened_total") == 0


def test_a_copy_replayed_after_kill_9_is_still_counted_once(tmp_path: Path, shared: SharedTables) -> None:
    fake = FakeAnthropic().start()
    cfg = config(fake, "3s")
    db = shared.at(tmp_path / "data")
    request = session_request(1, "resent-then-killed")
    server = Server(tmp_path, shared.config(cfg))
    try:
        body = request.SerializeToString()
        export_grpc(server, body)
        send_http(server, body)
        server.proc.send_signal(signal.SIGKILL)  # before the session closes: both copies replayed
        server.proc.wait()
        server = Server(tmp_path, shared.config(cfg))
        wait_for(lambda: "resent-then-killed" in coverage(db), timeout=60, interval=0.2)
    finally:
        server.stop()
        fake.stop()
    (line,) = coverage(db).values()
    assert line["spans"] == spans_of(request) and line["revision"] == 1
    judged = [r for r in line["results"] if r["judge"] is not None]
    assert judged and len(fake.requests) == len(judged)
