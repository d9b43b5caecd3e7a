"""The encoder, the outbox and the sender's retry policy, without a network."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import grpc
import pytest
from downstream import attrs
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry
from support import metric_value

from collector.export import encode
from collector.export.config import OtlpExport, Retry
from collector.export.metrics import ExportMetrics as _ExportMetrics
from collector.export.otlp import OK, Channel, OtlpExporter, Outcome, backoff, classify_grpc, classify_http
from collector.export.outbox import Entry, MemoryOutbox
from evaluators.evidence import Session, SkillLoad
from evaluators.result import Coverage, EvaluationResult, JudgeUsage

TRACE, AGENT, LOAD = "ab" * 16, "01" * 8, "02" * 8


def _coverage(**session: object) -> Coverage:
    s = Session(session_id="s-1", framework="strands", first_agent_span=(TRACE, AGENT), **session)  # type: ignore[arg-type]
    s.skill_loads.append(SkillLoad("release-notes", "loaded", "skill_tool", LOAD, TRACE))
    results = [
        EvaluationResult(
            "skill_selection_accuracy",
            "judged",
            "ok",
            "s-1",
            1,
            TRACE,
            LOAD,
            "release-notes",
            score=1.0,
            label="Yes",
            passed=True,
            explanation="right skill",
            judge=JudgeUsage("claude-x", input_tokens=1200, output_tokens=80, latency_ms=900.0),
        ),
        EvaluationResult("skill_omission", "error", "judge_timeout", "s-1", 1, explanation="timed out"),
    ]
    return Coverage(s, results)


def test_result_span_follows_the_contract() -> None:
    coverage = _coverage()
    selection, omission = (encode.result_span(r, coverage, 10**18) for r in coverage.results)
    assert selection.name == "evaluation skill_selection_accuracy"
    assert (selection.trace_id.hex(), selection.parent_span_id.hex()) == (TRACE, LOAD)
    assert [(lk.trace_id.hex(), lk.span_id.hex()) for lk in selection.links] == [(TRACE, LOAD)]
    a = attrs(selection.attributes)
    assert a["gen_ai.request.model"] == "claude-x"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (1200, 80)
    assert selection.end_time_unix_nano - selection.start_time_unix_nano == 900 * 10**6
    # Session-level, errored: parented to the first agent span, error.type and ERROR status.
    assert (omission.trace_id.hex(), omission.parent_span_id.hex()) == (TRACE, AGENT)
    o = attrs(omission.attributes)
    assert o["error.type"] == "judge_timeout" and "gen_ai.evaluation.score.value" not in o
    assert omission.status.code == omission.status.STATUS_CODE_ERROR
    assert attrs(omission.events[0].attributes)["error.type"] == "judge_timeout"


def test_span_ids_come_from_the_idempotency_key() -> None:
    a, b = _coverage(), _coverage()
    assert [e.key for e in encode.encode_spans(a, 1)] == [e.key for e in encode.encode_spans(b, 2)]
    ids = [Span.FromString(e.payload).span_id for e in encode.encode_spans(a, 1)]
    assert ids == [Span.FromString(e.payload).span_id for e in encode.encode_spans(b, 2)]
    assert len(set(ids)) == len(ids) == 3
    b.session.revision = 2
    b.results[:] = [EvaluationResult(**{**r.to_dict(), "revision": 2, "judge": r.judge}) for r in b.results]
    assert not set(ids) & {Span.FromString(e.payload).span_id for e in encode.encode_spans(b, 1)}


def test_a_session_with_no_recorded_span_gets_its_own_trace() -> None:
    coverage = Coverage(Session(session_id="lonely"), [])
    span = encode.coverage_span(coverage, 5)
    assert len(span.trace_id) == 16 and span.parent_span_id == b"" and not span.links
    request = ExportTraceServiceRequest.FromString(
        encode.trace_request([span.SerializeToString()], encode.resource())
    )
    assert request.resource_spans[0].scope_spans[0].scope.name == "skillgauge"


async def test_outbox_is_bounded_ordered_and_idempotent() -> None:
    box = MemoryOutbox(capacity=3)
    assert await box.put([Entry(k, k.encode(), 0) for k in "abc"]) == 0
    assert await box.put([Entry("b", b"B", 0)]) == 0  # same key: replaced, not duplicated
    assert await box.put([Entry("d", b"d", 0)]) == 1  # full: the oldest goes, and it is counted
    assert [e.key for e in await box.peek(10)] == ["c", "b", "d"]
    await box.ack(["c", "d"])
    assert [e.payload for e in await box.peek(10)] == [b"B"] and len(box) == 1


@dataclass
class FakeTransport:
    script: list[Outcome]
    bodies: list[bytes] = field(default_factory=list)

    async def send(self, signal: str, body: bytes) -> Outcome:
        self.bodies.append(body)
        return self.script.pop(0) if self.script else OK

    async def close(self) -> None:
        pass


def _channel(script: list[Outcome], metrics: _ExportMetrics) -> tuple[Channel, FakeTransport]:
    config = OtlpExport(
        endpoint="http://x:4317", batch_size=2, retry=Retry(initial_interval=0.01, max_interval=0.02)
    )
    transport = FakeTransport(script)
    return Channel("traces", config, transport, metrics, MemoryOutbox(), lambda p: b"".join(p)), transport


async def test_retryable_failures_back_off_then_deliver_everything_in_order() -> None:
    metrics = _ExportMetrics(CollectorRegistry())
    unavailable = Outcome(ok=False, retryable=True, reason="unavailable")
    channel, transport = _channel([unavailable, unavailable, OK], metrics)
    await channel.enqueue([Entry(k, k.encode(), 0) for k in "abc"])
    for _ in range(200):
        await asyncio.sleep(0.01)
        if not channel.backlog:
            break
    assert transport.bodies == [b"ab", b"ab", b"ab", b"c"]
    text = _text(metrics)
    assert (
        metric_value(text, "skillgauge_export_failures_total", exporter="otlp_traces", reason="unavailable")
        == 2
    )
    assert metric_value(text, "skillgauge_exported_results_total", exporter="otlp_traces") == 3
    assert metric_value(text, "skillgauge_export_backlog", exporter="otlp_traces") == 0
    await channel.shutdown(1)


async def test_permanent_refusal_and_partial_success_are_counted_not_retried() -> None:
    metrics = _ExportMetrics(CollectorRegistry())
    refused = Outcome(ok=False, retryable=False, reason="invalid_argument", message="bad span")
    partial = Outcome(ok=True, rejected=1, message="one bad")
    channel, transport = _channel([refused, partial], metrics)
    await channel.enqueue([Entry(k, k.encode(), 0) for k in "abcd"])
    await channel.shutdown(2)
    assert transport.bodies == [b"ab", b"cd"]
    text = _text(metrics)
    assert (
        metric_value(text, "skillgauge_export_dropped_total", exporter="otlp_traces", reason="rejected") == 2
    )
    assert metric_value(text, "skillgauge_export_dropped_total", reason="partially_rejected") == 1
    assert metric_value(text, "skillgauge_exported_results_total", exporter="otlp_traces") == 1


async def test_shutdown_with_the_downstream_away_reports_what_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = _ExportMetrics(CollectorRegistry())
    config = OtlpExport(endpoint="http://x:4317")
    exporter = OtlpExporter(
        config,
        metrics,
        transport=FakeTransport([Outcome(ok=False, retryable=True, reason="unavailable")] * 99),
    )
    await exporter.consume(_coverage())
    await exporter.shutdown(0.3)
    assert "3 results not exported at shutdown (in-memory outbox: they are lost)" in caplog.text


def test_retry_classification_follows_otlp() -> None:
    retry_info = status_pb2.Status(code=8)
    retry_info.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=3)))
    table = [
        (classify_grpc(grpc.StatusCode.UNAVAILABLE, "", None), True, None),
        (classify_grpc(grpc.StatusCode.DEADLINE_EXCEEDED, "", None), True, None),
        (classify_grpc(grpc.StatusCode.RESOURCE_EXHAUSTED, "", None), False, None),
        (classify_grpc(grpc.StatusCode.RESOURCE_EXHAUSTED, "", retry_info.SerializeToString()), True, 3.0),
        (classify_grpc(grpc.StatusCode.INVALID_ARGUMENT, "", None), False, None),
        (classify_grpc(grpc.StatusCode.UNAUTHENTICATED, "", None), False, None),
        (classify_http(429, "7", b""), True, 7.0),
        (classify_http(503, None, b""), True, None),
        (classify_http(400, None, status_pb2.Status(message="bad").SerializeToString()), False, None),
        (classify_http(413, None, b""), False, None),
    ]
    for outcome, retryable, delay in table:
        assert (outcome.retryable, outcome.retry_after) == (retryable, delay), outcome


def test_backoff_is_exponential_capped_and_jittered() -> None:
    retry = Retry(initial_interval=1, max_interval=30, multiplier=2)
    assert [backoff(n, retry, rand=lambda: 0.5) for n in (1, 2, 3, 6, 20)] == [1, 2, 4, 30, 30]
    assert backoff(1, retry, rand=lambda: 0.0) == pytest.approx(0.8)
    assert backoff(1, retry, rand=lambda: 1.0) == pytest.approx(1.2)


def _text(metrics: _ExportMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()
