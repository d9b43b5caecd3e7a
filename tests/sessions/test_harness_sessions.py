"""One harness run is one session, wherever the harness puts its id: only on log records,
on spans that are each the root of their own trace, or on some spans of many traces.

The runs are real recordings; each test moves where the id sits (drops it from spans, splits
the spans over traces) the way the harnesses named in issue 21 do, and checks the run still
assembles into its one session, with the evidence its spans showed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

sys.path.insert(0, str(FRAMEWORKS))
from capture import otlp_json

from collector.config import parse
from collector.detect.facts import sessions as session_facts
from collector.receiver.decode import parse_json
from collector.replay import replay
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session

SESSION_ATTRIBUTES = {key.split(":", 1)[1] for key in session_facts.SESSION_KEYS}


def log_requests(path: Path) -> list[ExportLogsServiceRequest]:
    lines = path.read_text().splitlines()
    return [parse_json(ExportLogsServiceRequest, line.encode()) for line in lines if line.strip()]


def assembler() -> tuple[Assembler, list[Session]]:
    closed: list[Session] = []
    return Assembler(parse({}).sessions, lambda s, _r: closed.append(s)), closed


def spans_one_by_one(request: ExportTraceServiceRequest) -> list[ExportTraceServiceRequest]:
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                single = ExportTraceServiceRequest()
                r = single.resource_spans.add()
                r.resource.CopyFrom(rs.resource)
                sc = r.scope_spans.add()
                sc.scope.CopyFrom(ss.scope)
                sc.spans.add().CopyFrom(span)
                out.append(single)
    return out


def drop_session_keys(request: ExportTraceServiceRequest) -> None:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                kept = [kv for kv in span.attributes if kv.key not in SESSION_ATTRIBUTES]
                del span.attributes[:]
                span.attributes.extend(kept)


def the_span(request: ExportTraceServiceRequest) -> object:
    return request.resource_spans[0].scope_spans[0].spans[0]


ADK = FRAMEWORKS / "adk"


def test_a_run_named_only_by_its_log_records_is_one_session_though_they_arrive_last() -> None:
    # Codex CLI's shape: the id only on log records.  Every span first, each under its own
    # trace-only session, then the log records that name the run.
    (request,) = trace_requests(ADK / "right_skill_content.traces.jsonl")
    drop_session_keys(request)
    asm, closed = assembler()
    singles = spans_one_by_one(request)
    for single in singles:
        asm.add_spans(single)
    assert all(s.provisional for s in asm.open_sessions())
    for logs in log_requests(ADK / "right_skill_content.logs.jsonl"):
        asm.add_logs(logs)
    assert [s.key for s in asm.open_sessions()] == ["adk-right_skill-content"]
    asm.close_all()
    (session,) = closed
    assert session.span_count == len(singles)
    assert [(x.skill, x.status) for x in session.skill_loads] == [("release-notes", "loaded")]


def test_spans_that_are_each_the_root_of_their_own_trace_are_one_session() -> None:
    # Gemini CLI's shape: session.id on every span, and every span its own trace.
    (request,) = trace_requests(FRAMEWORKS / "claude_code" / "right_skill.traces.jsonl")
    asm, closed = assembler()
    singles = spans_one_by_one(request)
    for n, single in enumerate(singles, 1):
        span = the_span(single)
        span.trace_id = n.to_bytes(16, "big")  # type: ignore[attr-defined]
        span.ClearField("parent_span_id")  # type: ignore[attr-defined]
        asm.add_spans(single)
    asm.close_all()
    assert [(s.session_id, s.span_count) for s in closed] == [
        ("0c611149-2af4-5b46-8ec0-8604ae6f16c9", len(singles))
    ]


def test_a_run_over_many_traces_joins_the_session_any_span_or_log_record_of_each_names() -> None:
    # Three traces: the first names the run on its spans, the second only on its log
    # records, the third on one of its spans, which arrives last.
    (request,) = trace_requests(ADK / "right_skill_content.traces.jsonl")
    singles = spans_one_by_one(request)
    thirds = [singles[i::3] for i in range(3)]
    last = thirds[2][-1]
    named_by_span = the_span(last)
    for t, part in enumerate(thirds, 1):
        for single in part:
            the_span(single).trace_id = t.to_bytes(16, "big")  # type: ignore[attr-defined]
            if t != 1 and the_span(single) is not named_by_span:
                drop_session_keys(single)
    logs = log_requests(ADK / "right_skill_content.logs.jsonl")
    for request_logs in logs:
        for rl in request_logs.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    record.trace_id = (2).to_bytes(16, "big")
    ordered = [*thirds[1], *thirds[2], *thirds[0]]
    ordered.remove(last)
    asm, closed = assembler()
    for single in ordered:
        asm.add_spans(single)
    assert sorted(s.key for s in asm.open_sessions()) == [f"{2:032x}", f"{3:032x}", "adk-right_skill-content"]
    for request_logs in logs:
        asm.add_logs(request_logs)
    asm.add_spans(last)
    assert [s.key for s in asm.open_sessions()] == ["adk-right_skill-content"]
    asm.close_all()
    (session,) = closed
    assert session.span_count == len(singles)
    assert [(x.skill, x.status) for x in session.skill_loads] == [("release-notes", "loaded")]


def test_a_log_record_with_no_key_and_no_trace_is_counted_and_named_and_replay_still_passes(
    tmp_path: Path,
) -> None:
    folder = FRAMEWORKS / "claude_code"
    logs = log_requests(folder / "right_skill.logs.jsonl")
    records = logs[0].resource_logs[0].scope_logs[0].log_records
    orphan = records.add()
    orphan.CopyFrom(records[0])
    kept = [kv for kv in orphan.attributes if kv.key not in SESSION_ATTRIBUTES]
    del orphan.attributes[:]
    orphan.attributes.extend(kept)
    orphan.ClearField("trace_id")
    orphan_logs = tmp_path / "right_skill.logs.json"
    orphan_logs.write_text(otlp_json(logs[0]))
    traces = str(folder / "right_skill.traces.jsonl")

    plain = asyncio.run(replay([traces, str(folder / "right_skill.logs.jsonl")], parse({})))
    with_orphan = asyncio.run(replay([traces, str(orphan_logs)], parse({})))

    assert with_orphan.problems == []
    (note,) = with_orphan.notes
    assert "1 not used" in note and "no session key and no trace_id" in note
    event = next(kv.value.string_value for kv in orphan.attributes if kv.key == "event.name")
    assert f"({event})" in note
    # Its neighbours untouched: the same sessions and loads as without it.  (Only the first
    # logs request is replayed here; the plain replay has all of them.)
    assert [c.session.session_id for c in with_orphan.coverages] == [
        c.session.session_id for c in plain.coverages
    ]
    assert [(x.skill, x.status) for x in with_orphan.coverages[0].session.skill_loads] == [
        (x.skill, x.status) for x in plain.coverages[0].session.skill_loads
    ]


def test_a_fold_reads_no_history_again(monkeypatch: Any) -> None:
    # The same run twice: named from its first span, and named only by a log record that
    # arrives halfway.  The text scanned must be the same: what the trace-only session read
    # moves with it.
    from collector.detect.session import SessionEvidence

    def scanned(requests: list[ExportTraceServiceRequest], logs_at: int) -> int:
        total = 0
        scan = SessionEvidence._scan

        def counting(self: SessionEvidence, raw: str, seen: Any) -> None:
            nonlocal total
            total += len(raw)
            scan(self, raw, seen)

        monkeypatch.setattr(SessionEvidence, "_scan", counting)
        asm, closed = assembler()
        for n, single in enumerate(requests):
            if n == logs_at:
                for logs in log_requests(ADK / "right_skill_content.logs.jsonl"):
                    asm.add_logs(logs)
            asm.add_spans(single)
        asm.close_all()
        assert [s.session_id for s in closed] == ["adk-right_skill-content"]
        monkeypatch.undo()
        return total

    (request,) = trace_requests(ADK / "right_skill_content.traces.jsonl")
    named = spans_one_by_one(request)
    (request,) = trace_requests(ADK / "right_skill_content.traces.jsonl")
    drop_session_keys(request)
    unnamed = spans_one_by_one(request)
    half = len(unnamed) // 2
    baseline = scanned(named, half)
    assert baseline > 0
    assert scanned(unnamed, half) == baseline
