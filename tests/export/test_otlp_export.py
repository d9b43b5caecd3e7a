"""End to end: real SDK exporters -> ``skillgauge serve`` -> evaluation spans at a downstream
OTLP receiver, with the right trace, parent, link and attributes; an outage delays them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from downstream import Downstream, attrs
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, metric_value, readable_spans, reserved_port, trace_requests, wait_for

EXPECT = [{"when": {"user_message": "release notes"}, "expect": ["release-notes"]}]
SESSIONS = {
    "strands-right_skill-0001": "right_skill",
    "strands-missing_skill-0001": "missing_skill",
    "strands-no_skill-0001": "no_skill",
}
FAST_RETRY = {"initial_interval": "0.1s", "max_interval": "0.5s"}


def _send(srv: Server, name: str, protocol: str = "grpc") -> list[Any]:
    (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
    if protocol == "grpc":
        exporter: Any = GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
    else:
        exporter = HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
    assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS
    return list(request.resource_spans[0].scope_spans[0].spans)


def _records(srv: Server, session_id: str) -> list[dict[str, Any]]:
    def closed() -> list[dict[str, Any]] | None:
        code, body = srv.get_json(f"/v1/sessions/{session_id}")
        return body["revisions"][-1]["records"] if code == 200 and "revisions" in body else None

    return wait_for(closed, timeout=15)  # type: ignore[no-any-return]


def _server(tmp: Path, endpoint: str, protocol: str = "grpc", logs: bool = False) -> Server:
    return Server(
        tmp,
        {
            "expectations": EXPECT,
            "export": {
                "otlp": {"endpoint": endpoint, "protocol": protocol, "logs": logs, "retry": FAST_RETRY}
            },
        },
    )


def test_evaluation_spans_reach_the_downstream_with_parents_links_and_attributes(tmp_path: Path) -> None:
    downstream = Downstream("grpc")
    srv = _server(tmp_path, downstream.endpoint, logs=True)
    try:
        inputs = {sid: _send(srv, name) for sid, name in SESSIONS.items()}
        records = {sid: _records(srv, sid) for sid in SESSIONS}
        expected = sum(len(r) for r in records.values())  # results + one coverage span per session
        received = downstream.wait_spans(expected)
        assert len(received) == expected

        by_session: dict[str, list[Any]] = {}
        for resource, span in received:
            assert resource["service.name"] == "skillgauge"
            by_session.setdefault(attrs(span.attributes)["session.id"], []).append(span)
        assert set(by_session) == set(SESSIONS)

        for sid, spans in by_session.items():
            agent = next(s for s in inputs[sid] if s.name.startswith("invoke_agent"))
            results = [r for r in records[sid] if "coverage" not in r]
            (coverage,) = [s for s in spans if s.name == "skillgauge.coverage"]
            # The coverage summary hangs off the session's first agent span, with one link to it.
            assert (coverage.trace_id, coverage.parent_span_id) == (agent.trace_id, agent.span_id)
            assert [(link.trace_id, link.span_id) for link in coverage.links] == [
                (agent.trace_id, agent.span_id)
            ]
            summary = attrs(coverage.attributes)
            assert summary["skillgauge.results.judged"] == sum(r["status"] == "judged" for r in results)
            assert summary["skillgauge.catalog.state"] == "advertised"

            evaluation_spans = [s for s in spans if s.name != "skillgauge.coverage"]
            assert len(evaluation_spans) == len(results)
            for result, span in zip(results, evaluation_spans, strict=True):
                assert span.name == f"evaluation {result['evaluation']}"
                evaluated = bytes.fromhex(result["trace_id"]), bytes.fromhex(result["span_id"])
                assert evaluated in {
                    (s.trace_id, s.span_id) for s in inputs[sid]
                }  # a real span of the session
                assert (span.trace_id, span.parent_span_id) == evaluated
                assert [(link.trace_id, link.span_id) for link in span.links] == [evaluated]
                a = attrs(span.attributes)
                assert a["gen_ai.evaluation.name"] == result["evaluation"]
                assert a.get("gen_ai.evaluation.score.value") == result["score"]  # only when judged
                assert a.get("gen_ai.evaluation.score.label") == result["label"]
                assert a.get("gen_ai.evaluation.explanation") == (result["explanation"] or None)
                assert a["session.id"] == sid
                assert a.get("gen_ai.skill.name") == result["skill"]
                assert a["skillgauge.evaluation.status"] == result["status"]
                assert a["skillgauge.evaluation.reason"] == result["reason"]
                assert a["skillgauge.session.revision"] == 1
                assert a.get("error.type") == (result["reason"] if result["status"] == "error" else None)
                assert a.get("skillgauge.evaluation.passed") == result["passed"]
                (event,) = span.events
                assert event.name == "gen_ai.evaluation.result"
                assert attrs(event.attributes) == {
                    k: v for k, v in a.items() if k.startswith("gen_ai.evaluation.")
                }

        # The session that missed its expected skill: its result is session-level (no load to
        # anchor to), so it too parents to the first agent span.
        missing = [
            s for s in by_session["strands-missing_skill-0001"] if s.name == "evaluation skill_invoked"
        ]
        agent = next(s for s in inputs["strands-missing_skill-0001"] if s.name.startswith("invoke_agent"))
        assert missing[0].parent_span_id == agent.span_id
        assert attrs(missing[0].attributes)["skillgauge.evaluation.passed"] is False

        # The same results as gen_ai.evaluation.result log records in the evaluated span's context.
        results = [r for sid in SESSIONS for r in records[sid] if "coverage" not in r]
        logs = wait_for(lambda: len(downstream.log_records()) >= len(results) and downstream.log_records())
        assert len(logs) == len(results)
        anchors = {
            (a["session.id"], a["gen_ai.evaluation.name"], a.get("gen_ai.skill.name")): (
                s.trace_id,
                s.parent_span_id,
            )
            for s in (span for spans in by_session.values() for span in spans)
            if (a := attrs(s.attributes)) and "gen_ai.evaluation.name" in a
        }
        for record in logs:
            assert record.event_name == "gen_ai.evaluation.result"
            a = attrs(record.attributes)
            key = (a["session.id"], a["gen_ai.evaluation.name"], a.get("gen_ai.skill.name"))
            assert (record.trace_id, record.span_id) == anchors[key]  # the evaluated span's context

        metrics = wait_for(
            lambda: (
                (m := srv.metrics())
                and metric_value(m, "skillgauge_export_backlog", exporter="otlp_traces") == 0
                and m
            )
        )
        assert metric_value(metrics, "skillgauge_exported_results_total", exporter="otlp_traces") == expected
        assert metric_value(metrics, "skillgauge_exported_results_total", exporter="otlp_logs") == len(
            results
        )
        assert metric_value(metrics, "skillgauge_export_failures_total", exporter="otlp_traces") == 0
    finally:
        srv.stop()
        downstream.stop()


def test_span_ids_are_stable_across_a_replay_of_the_same_session(tmp_path: Path) -> None:
    """Deterministic span ids: a result exported twice is one span downstream."""
    ids = []
    for run in range(2):
        downstream = Downstream("grpc")
        (tmp_path / str(run)).mkdir()
        srv = _server(tmp_path / str(run), downstream.endpoint)
        try:
            _send(srv, "right_skill")
            count = len(_records(srv, "strands-right_skill-0001"))  # results + coverage
            ids.append(sorted(s.span_id for _, s in downstream.wait_spans(count)))
            assert len(ids[-1]) == count
        finally:
            srv.stop()
            downstream.stop()
    assert ids[0] == ids[1]


def test_a_downstream_outage_delays_results_and_loses_none(tmp_path: Path) -> None:
    held = reserved_port()  # nothing listens there yet, and no other process can take it
    port = held.getsockname()[1]
    srv = _server(tmp_path, f"http://127.0.0.1:{port}")
    downstream = None
    try:
        for name in SESSIONS.values():
            _send(srv, name)
        total = sum(len(_records(srv, sid)) for sid in SESSIONS)  # results + coverage summaries

        def backlog_and_failures() -> tuple[float, float] | None:
            m = srv.metrics()
            backlog = metric_value(m, "skillgauge_export_backlog", exporter="otlp_traces")
            failures = sum(
                float(line.rpartition(" ")[2])
                for line in m.splitlines()
                if line.startswith("skillgauge_export_failures_total{") and 'exporter="otlp_traces"' in line
            )
            return (backlog, failures) if backlog > 0 and failures >= 2 else None

        backlog, _ = wait_for(backlog_and_failures, timeout=15)
        assert backlog == total  # every result and coverage summary waits

        downstream = Downstream("grpc", port=port, fail_first=1)  # comes back, still flaky once
        received = downstream.wait_spans(total)
        assert len({s.span_id for _, s in received}) == total
        metrics = wait_for(
            lambda: (
                (m := srv.metrics())
                and metric_value(m, "skillgauge_export_backlog", exporter="otlp_traces") == 0
                and m
            )
        )
        assert metric_value(metrics, "skillgauge_exported_results_total", exporter="otlp_traces") == total
        assert (
            metric_value(
                metrics, "skillgauge_export_failures_total", exporter="otlp_traces", reason="unavailable"
            )
            >= 2
        )
        assert "export recovered after" in srv.log()
    finally:
        held.close()
        srv.stop()
        if downstream is not None:
            downstream.stop()


@pytest.mark.parametrize("fail_first", [0, 2])
def test_otlp_http_export_with_gzip(tmp_path: Path, fail_first: int) -> None:
    downstream = Downstream("http", fail_first=fail_first)
    srv = _server(tmp_path, downstream.endpoint, protocol="http", logs=True)
    try:
        inputs = _send(srv, "right_skill", protocol="http")
        records = _records(srv, "strands-right_skill-0001")
        received = downstream.wait_spans(len(records))
        (result,) = [s for _, s in received if s.name == "evaluation skill_invoked"]
        load = next(s for s in inputs if s.name == "execute_tool skills")
        assert (result.trace_id, result.parent_span_id) == (load.trace_id, load.span_id)
        assert set(downstream.content_encodings) == {"gzip"}
        wait_for(lambda: len(downstream.log_records()) == len(records) - 1)
    finally:
        srv.stop()
        downstream.stop()
