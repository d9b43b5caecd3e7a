"""Items sent again are taken once: by (trace id, span id) for spans, by content for log
records; while the session is open, and after it closed and could be reopened."""

from __future__ import annotations

import copy

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.receiver.decode import parse_json
from collector.sessions.assembler import Assembler, log_id
from evaluators.evidence import Session


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[Assembler, list[Session], Clock]:
    closed: list[Session] = []
    clock = Clock()
    config = parse({"sessions": {"idle_timeout": "5s"}}).sessions
    return Assembler(config, lambda s, r: closed.append(s), clock=clock), closed, clock


def logs(name: str) -> list[ExportLogsServiceRequest]:
    path = FRAMEWORKS / "claude_code" / f"{name}.logs.jsonl"
    return [
        parse_json(ExportLogsServiceRequest, line.encode()) for line in path.read_text().splitlines() if line
    ]


def test_a_request_sent_twice_is_counted_and_detected_once() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    assembler, closed, _ = make()
    first = assembler.add_spans(request)
    again = assembler.add_spans(copy.deepcopy(request))
    assert (first.accepted, again.accepted, again.rejected) == (spans, spans, 0)  # both acknowledged
    assert assembler.duplicates == {"traces": spans}
    assembler.close_all()
    (session,) = closed
    assert session.span_count == spans and len(session.skill_loads) == 1


def test_a_copy_after_the_session_closed_does_not_reopen_it() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    assembler, closed, clock = make()
    assembler.add_spans(request)
    clock.now += 10
    assembler.close_due()
    assert len(closed) == 1 and assembler.open_count == 0
    assembler.add_spans(copy.deepcopy(request))
    assert assembler.open_count == 0 and assembler.reopened == 0
    # A new span of that session still reopens it, as revision 2 with every earlier span.
    late = copy.deepcopy(request)
    span = late.resource_spans[0].scope_spans[0].spans[0]
    span.span_id = bytes(7) + b"\x7f"
    assembler.add_spans(late)
    assembler.close_all()
    assert [s.revision for s in closed] == [1, 2]
    assert closed[1].span_count == closed[0].span_count + 1
    assert len(closed[1].skill_loads) == len(closed[0].skill_loads)


def test_log_records_sent_twice_are_taken_once_and_changed_ones_are_new() -> None:
    requests = logs("file_read")
    records = sum(len(sl.log_records) for r in requests for rl in r.resource_logs for sl in rl.scope_logs)
    assembler, _, _ = make()
    for request in requests:
        assembler.add_logs(request)
    for request in requests:
        assert assembler.add_logs(copy.deepcopy(request)).accepted > 0
    assert assembler.duplicates == {"logs": records}
    changed = copy.deepcopy(requests[0])
    record = changed.resource_logs[0].scope_logs[0].log_records[0]
    before = log_id(record)
    record.time_unix_nano += 1
    assert log_id(record) != before
    assembler.add_logs(changed)
    in_first = sum(len(sl.log_records) for rl in changed.resource_logs for sl in rl.scope_logs)
    assert assembler.duplicates == {"logs": records + in_first - 1}  # all but the changed one


def test_a_copy_of_spans_without_a_key_after_close_is_taken_once() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    keyless = copy.deepcopy(request)
    for rs in keyless.resource_spans:  # the same spans, as a harness that names no session sends them
        kept = [kv for kv in rs.resource.attributes if kv.key != "session.id"]
        del rs.resource.attributes[:]
        rs.resource.attributes.extend(kept)
        for ss in rs.scope_spans:
            for span in ss.spans:
                kept = [kv for kv in span.attributes if kv.key != "session.id"]
                del span.attributes[:]
                span.attributes.extend(kept)
    assembler, _, clock = make()
    assembler.add_spans(request)
    clock.now += 10
    assembler.close_due()
    assembler.add_spans(keyless)  # bound to the closed session by their traces, and taken already
    assert assembler.open_count == 0 and assembler.duplicates == {"traces": spans}
