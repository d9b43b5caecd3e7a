"""Evaluation results as OTLP spans and log records.  Pure: no I/O, no clock of its own.

The contract (DESIGN.md, "Evaluation span"): each result becomes a span named
``evaluation {evaluation}`` in the trace of the evaluated span, parented to it, with one
link to it, ``gen_ai.evaluation.*`` attributes, our status / reason / revision, the judge's
model and tokens, and one ``gen_ai.evaluation.result`` span event.  Session-level results
and the coverage summary hang off the session's first agent span and carry ``session.id``.

Span ids are derived from the result's idempotency key, so an export retried after a
restart (or a result exported twice) yields the same span id, which backends deduplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from collector import __version__
from evaluators.evidence import LOAD_STATUSES
from evaluators.result import STATUSES, Coverage, EvaluationResult

SCOPE = "skillgauge"
# Bump when the exported shape changes meaning: it is part of every idempotency key.
SCHEMA_VERSION = 1
EVENT_NAME = "gen_ai.evaluation.result"
COVERAGE_SPAN = "skillgauge.coverage"
SEVERITY_INFO = 9
SEVERITY_WARN = 13

AttrValue = str | bool | int | float | Sequence[str]


@dataclass(frozen=True, slots=True)
class Encoded:
    """One result ready for the outbox: its idempotency key and serialized message."""

    key: str
    payload: bytes


def idempotency_key(result: EvaluationResult) -> str:
    """The result's own key (session, revision, evaluation, skill, span) plus the export schema."""
    return f"{result.key}\x1f{SCHEMA_VERSION}"


def coverage_key(coverage: Coverage) -> str:
    s = coverage.session
    return "\x1f".join((s.key, str(s.revision), COVERAGE_SPAN, str(SCHEMA_VERSION)))


def span_id_for(key: str) -> bytes:
    digest = hashlib.sha256(key.encode()).digest()
    return digest[:8] if any(digest[:8]) else b"\x00" * 7 + b"\x01"


def _trace_id_for(session_id: str) -> bytes:
    # Only for a session that recorded no span id at all (nothing to join): its own trace.
    return hashlib.sha256(b"skillgauge-session\x1f" + session_id.encode()).digest()[:16]


def _value(value: AttrValue) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value]))


def _attributes(attrs: Mapping[str, AttrValue | None]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in attrs.items() if v is not None]


def evaluation_attributes(result: EvaluationResult) -> dict[str, AttrValue | None]:
    """The ``gen_ai.evaluation.*`` attributes (those the span event and log record carry)."""
    return {
        "gen_ai.evaluation.name": result.evaluation,
        "gen_ai.evaluation.score.value": result.score,
        "gen_ai.evaluation.score.label": result.label,
        "gen_ai.evaluation.explanation": result.explanation or None,
        "error.type": result.reason if result.status == "error" else None,
    }


def result_attributes(result: EvaluationResult) -> dict[str, AttrValue | None]:
    judge = result.judge
    return {
        **evaluation_attributes(result),
        "session.id": result.session_id,
        "skillgauge.tenant": result.tenant or None,
        "gen_ai.skill.name": result.skill,
        "skillgauge.evaluation.status": result.status,
        "skillgauge.evaluation.reason": result.reason,
        "skillgauge.evaluation.passed": result.passed,
        "skillgauge.session.revision": result.revision,
        "skillgauge.framework": result.framework,
        "skillgauge.signal": result.signal,
        "skillgauge.body_source": result.body_source,
        "skillgauge.catalog_source": result.catalog_source,
        "gen_ai.request.model": judge.model if judge else None,
        "gen_ai.usage.input_tokens": judge.input_tokens if judge else None,
        "gen_ai.usage.output_tokens": judge.output_tokens if judge else None,
        "gen_ai.usage.cache_read.input_tokens": judge.cache_read_tokens if judge else None,
        "gen_ai.usage.cache_creation.input_tokens": judge.cache_write_tokens if judge else None,
        "skillgauge.judge.latency_ms": float(judge.latency_ms) if judge else None,
        "skillgauge.judge.cost_usd": float(judge.cost_usd) if judge else None,
        "skillgauge.judge.context_truncated": judge.context_truncated if judge else None,
        "openinference.span.kind": "EVALUATOR",
    }


def _anchor(result: EvaluationResult, coverage: Coverage) -> tuple[bytes, bytes | None]:
    """(trace id, span id) of the span this result is about; span id None = no anchor."""
    if result.trace_id and result.span_id:
        return bytes.fromhex(result.trace_id), bytes.fromhex(result.span_id)
    return _session_anchor(coverage)


def _session_anchor(coverage: Coverage) -> tuple[bytes, bytes | None]:
    s = coverage.session
    if s.first_agent_span is not None:
        return bytes.fromhex(s.first_agent_span[0]), bytes.fromhex(s.first_agent_span[1])
    if s.skill_loads:  # no agent span recorded: the first load is the next best thing
        return bytes.fromhex(s.skill_loads[0].trace_id), bytes.fromhex(s.skill_loads[0].span_id)
    return _trace_id_for(s.key), None


def _carrier(
    name: str,
    key: str,
    anchor: tuple[bytes, bytes | None],
    attrs: Mapping[str, AttrValue | None],
    end_ns: int,
    duration_ns: int = 0,
) -> Span:
    trace_id, parent = anchor
    span = Span(
        trace_id=trace_id,
        span_id=span_id_for(key),
        parent_span_id=parent or b"",
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=end_ns - duration_ns,
        end_time_unix_nano=end_ns,
        attributes=_attributes(attrs),
    )
    if parent:
        span.links.append(
            Span.Link(
                trace_id=trace_id,
                span_id=parent,
                attributes=_attributes({"skillgauge.link.type": "evaluated_span"}),
            )
        )
    return span


def result_span(result: EvaluationResult, coverage: Coverage, end_ns: int) -> Span:
    key = idempotency_key(result)
    duration = int(result.judge.latency_ms * 1e6) if result.judge else 0
    span = _carrier(
        f"evaluation {result.evaluation}",
        key,
        _anchor(result, coverage),
        result_attributes(result),
        end_ns,
        min(duration, end_ns),
    )
    span.events.append(
        Span.Event(
            time_unix_nano=end_ns, name=EVENT_NAME, attributes=_attributes(evaluation_attributes(result))
        )
    )
    if result.status == "error":
        span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=result.explanation[:256]))
    return span


def coverage_attributes(coverage: Coverage) -> dict[str, AttrValue | None]:
    c = coverage.to_dict()
    attrs: dict[str, AttrValue | None] = {
        "session.id": c["session_id"],
        "skillgauge.tenant": c.get("tenant") or None,
        "skillgauge.session.revision": c["revision"],
        "skillgauge.session.close_reason": c["close_reason"],
        "skillgauge.session.spans": c["spans"],
        "skillgauge.framework": c["framework"],
        "skillgauge.content_capture": c["content_capture"],
        "skillgauge.catalog.state": c["catalog"]["state"],
        "skillgauge.catalog.skills": c["catalog"]["skills"],
        "skillgauge.expectations.state": c["expectations"]["state"],
        "skillgauge.expectations.expected": c["expectations"]["expected"],
        "skillgauge.expectations.met": [s or "" for s in c["expectations"]["met"]],
        "skillgauge.expectations.missed": [s or "" for s in c["expectations"]["missed"]],
        "openinference.span.kind": "EVALUATOR",
    }
    for status in LOAD_STATUSES:
        attrs[f"skillgauge.loads.{status}"] = c["loads_by_status"][status]
    for result_status in STATUSES:
        attrs[f"skillgauge.results.{result_status}"] = c["results_by_status"][result_status]
    return attrs


def coverage_span(coverage: Coverage, end_ns: int) -> Span:
    return _carrier(
        COVERAGE_SPAN,
        coverage_key(coverage),
        _session_anchor(coverage),
        coverage_attributes(coverage),
        end_ns,
    )


def result_log(result: EvaluationResult, coverage: Coverage, end_ns: int) -> LogRecord:
    """The same result as a ``gen_ai.evaluation.result`` event (an OTLP log record with
    ``event_name``, in the evaluated span's trace and span context)."""
    trace_id, span_id = _anchor(result, coverage)
    return LogRecord(
        time_unix_nano=end_ns,
        observed_time_unix_nano=end_ns,
        severity_number=SEVERITY_WARN if result.status == "error" else SEVERITY_INFO,  # type: ignore[arg-type]
        severity_text="WARN" if result.status == "error" else "INFO",
        event_name=EVENT_NAME,
        trace_id=trace_id,
        span_id=span_id or b"",
        attributes=_attributes(
            {k: v for k, v in result_attributes(result).items() if k != "openinference.span.kind"}
        ),
    )


def encode_spans(coverage: Coverage, end_ns: int) -> list[Encoded]:
    """Every result of one session revision, then its coverage summary, as serialized spans."""
    out = [
        Encoded(idempotency_key(r), result_span(r, coverage, end_ns).SerializeToString())
        for r in coverage.results
    ]
    out.append(Encoded(coverage_key(coverage), coverage_span(coverage, end_ns).SerializeToString()))
    return out


def encode_logs(coverage: Coverage, end_ns: int) -> list[Encoded]:
    return [
        Encoded(idempotency_key(r), result_log(r, coverage, end_ns).SerializeToString())
        for r in coverage.results
    ]


def resource(attributes: Mapping[str, AttrValue] | None = None) -> Resource:
    base: dict[str, AttrValue | None] = {
        "service.name": "skillgauge",
        "service.version": __version__,
        "telemetry.sdk.name": "skillgauge",
        "telemetry.sdk.language": "python",
    }
    return Resource(attributes=_attributes({**base, **(attributes or {})}))


def _scope() -> InstrumentationScope:
    return InstrumentationScope(name=SCOPE, version=__version__)


def trace_request(payloads: Iterable[bytes], res: Resource) -> bytes:
    """One ExportTraceServiceRequest from serialized spans (the outbox's payloads)."""
    scope_spans = ScopeSpans(scope=_scope(), spans=[Span.FromString(p) for p in payloads])
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=res, scope_spans=[scope_spans])]
    )
    return bytes(request.SerializeToString())


def logs_request(payloads: Iterable[bytes], res: Resource) -> bytes:
    scope_logs = ScopeLogs(scope=_scope(), log_records=[LogRecord.FromString(p) for p in payloads])
    request = ExportLogsServiceRequest(resource_logs=[ResourceLogs(resource=res, scope_logs=[scope_logs])])
    return bytes(request.SerializeToString())
