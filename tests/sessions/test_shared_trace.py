"""Sessions that share one trace keep their own items, in whatever order the items arrive.

``opencode serve`` runs one session after another in one trace (the recording ``serve``:
two sessions, the first loads release-notes through its skill tool, the second reads
csv-cleanup's SKILL.md).  Its permission checks are log records that name no session; each
is logged under a span of its own session's tool call.  Served, spans wait in a queue while
log records are assembled at once, so the log records may come before or after every span:
each order, and a close of both sessions in between, must give each session its own loads
and nothing of the other's (expected.json is the ground truth), in the assembler and served.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, Server, metric_value, trace_requests, wait_for

from collector.config import parse
from collector.receiver.decode import parse_json
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session

OPENCODE = FRAMEWORKS / "opencode"
SCENARIOS = {
    name: scenario
    for name, scenario in json.loads((OPENCODE / "expected.json").read_text())["scenarios"].items()
    if scenario["files"] == ["serve.traces.jsonl", "serve.logs.jsonl"]
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def traces() -> list[ExportTraceServiceRequest]:
    return trace_requests(OPENCODE / "serve.traces.jsonl")


def logs() -> list[ExportLogsServiceRequest]:
    lines = (OPENCODE / "serve.logs.jsonl").read_text().splitlines()
    return [parse_json(ExportLogsServiceRequest, line.encode()) for line in lines if line.strip()]


def run(*steps: Callable[[Assembler, Clock], None]) -> dict[str, list[Session]]:
    """Each step in turn on one assembler, then everything closed: each session id's
    revisions, in order."""
    closed: dict[str, list[Session]] = {}
    clock = Clock()
    asm = Assembler(
        parse({"sessions": {"idle_timeout": "3s"}}).sessions,
        lambda s, _r: closed.setdefault(s.session_id, []).append(s),
        clock=clock,
    )
    for step in steps:
        step(asm, clock)
    asm.close_all()
    return closed


def all_spans(asm: Assembler, _clock: Clock) -> None:
    for n, request in enumerate(traces()):
        asm.add_spans(request, 1 + n)


def all_logs(asm: Assembler, _clock: Clock) -> None:
    for n, request in enumerate(logs()):
        asm.add_logs(request, 100 + n)


def idle_close(asm: Assembler, clock: Clock) -> None:
    clock.now += 4
    assert asm.close_due() > 0


def loads(session: Session) -> list[tuple[str, str, str]]:
    return sorted((load.skill, load.signal, load.status) for load in session.skill_loads)


def expected(scenario: dict[str, object]) -> list[tuple[str, str, str]]:
    rows = scenario["loads"]
    assert isinstance(rows, list)
    return sorted((row["skill"], row["signal"], row["status"]) for row in rows)


def assert_each_session_has_its_own_loads(closed: dict[str, list[Session]]) -> None:
    assert len(SCENARIOS) == 2
    for scenario in SCENARIOS.values():
        last = closed[str(scenario["session_id"])][-1]
        assert loads(last) == expected(scenario), scenario["session_id"]


def test_permission_checks_logged_after_every_span_complete_their_own_sessions_tool_calls() -> None:
    # Served, the order that failed: the trace is bound to the second session by then, and
    # the first session's release-notes check (its skill tool call's) went there, a load of
    # its own, unresolved.
    assert_each_session_has_its_own_loads(run(all_spans, all_logs))


def test_permission_checks_logged_before_the_spans_complete_their_own_sessions_tool_calls() -> None:
    assert_each_session_has_its_own_loads(run(all_logs, all_spans))


def test_permission_checks_that_reopen_both_sessions_of_the_trace_go_to_their_own() -> None:
    closed = run(all_spans, idle_close, all_logs)
    assert_each_session_has_its_own_loads(closed)
    assert all(len(closed[str(s["session_id"])]) == 2 for s in SCENARIOS.values())  # each reopened


def test_spans_resent_into_a_trace_of_two_sessions_count_once() -> None:
    closed: dict[str, list[Session]] = {}
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.setdefault(s.session_id, []).append(s))
    for request in traces():
        asm.add_spans(request)
    for request in logs():
        asm.add_logs(request)
    spans = sum(len(s.spans) for r in traces() for rs in r.resource_spans for s in rs.scope_spans)
    records = sum(len(s.log_records) for r in logs() for rl in r.resource_logs for s in rl.scope_logs)
    assert sum(asm.add_spans(request).accepted for request in traces()) == spans
    assert sum(asm.add_logs(request).accepted for request in logs()) == records
    assert asm.duplicates == {"traces": spans, "logs": records}
    asm.close_all()
    assert_each_session_has_its_own_loads(closed)


def send(server: Server, method: str, requests: list[Any]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        export = channel.unary_unary(
            f"/opentelemetry.proto.collector.{method}/Export",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        for request in requests:
            export(request, timeout=10)


def test_served_permission_checks_sent_after_every_span_was_assembled_go_to_their_own_session(
    tmp_path: Path,
) -> None:
    # The order that made the served reference flaky, made certain: every span assembled (the
    # open sessions hold all of them) before the first log record is sent.
    spans = traces()
    total = sum(len(s.spans) for r in spans for rs in r.resource_spans for s in rs.scope_spans)
    server = Server(tmp_path, {"sessions": {"idle_timeout": "5s"}})
    try:
        send(server, "trace.v1.TraceService", spans)

        def assembled() -> bool:
            code, body = server.get_json("/v1/sessions?state=open&limit=500")
            return code == 200 and sum(row["spans"] for row in body["sessions"]) == total

        wait_for(assembled, timeout=30)
        send(server, "logs.v1.LogsService", logs())
        for scenario in SCENARIOS.values():

            def evaluated(session_id: str = str(scenario["session_id"])) -> Any:
                code, body = server.get_json(f"/v1/sessions/{session_id}")
                return body if code == 200 and "open" not in body and body.get("revisions") else None

            last = wait_for(evaluated, timeout=30)["revisions"][-1]["records"]
            loaded = {(r["skill"], r["signal"], r["span_id"]) for r in last if r.get("skill")}
            want = {(row["skill"], row["signal"]) for row in scenario["loads"]}  # type: ignore[union-attr]
            assert {(skill, signal) for skill, signal, _ in loaded} == want, loaded
            assert len(loaded) == len(want)  # one span per load: none of the other session's
    finally:
        server.stop()


def test_served_records_held_for_their_spans_show_on_metrics_until_their_spans_come(tmp_path: Path) -> None:
    # Every span in but the permission checks' own, then the logs: the two records logged
    # under those spans are held (their bytes on /metrics), and placed when the spans come.
    first, later = held_back({"Permission.ask"})
    server = Server(tmp_path, {"sessions": {"idle_timeout": "60s"}})

    def held() -> float:
        return metric_value(server.metrics(), "skillgauge_cache_bytes", cache="held_logs")

    try:
        send(server, "trace.v1.TraceService", first)
        total = sum(len(s.spans) for r in first for rs in r.resource_spans for s in rs.scope_spans)

        def assembled() -> bool:
            code, body = server.get_json("/v1/sessions?state=open&limit=500")
            return code == 200 and sum(row["spans"] for row in body["sessions"]) == total

        wait_for(assembled, timeout=30)
        send(server, "logs.v1.LogsService", logs())
        wait_for(lambda: held() > 0, timeout=30)
        text = server.metrics()
        assert metric_value(text, "skillgauge_cache_max_bytes", cache="held_logs") == 32 * 2**20
        assert metric_value(text, "skillgauge_cache_evictions_total", cache="held_logs") == 0
        send(server, "trace.v1.TraceService", [later])
        wait_for(lambda: held() == 0, timeout=30)
    finally:
        server.stop()


def records_by_request() -> dict[int, ExportLogsServiceRequest]:
    """Each log record in a request of its own, before the first trace request that carries
    the span it was logged under (its key: that trace request's index)."""
    where = {
        span.span_id: n
        for n, request in enumerate(traces())
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    }
    out: dict[int, ExportLogsServiceRequest] = {}
    for request in logs():
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    part = out.setdefault(where[record.span_id], ExportLogsServiceRequest())
                    part.resource_logs.add(resource=rl.resource).scope_logs.add(scope=sl.scope).log_records.append(record)
    return out


def each_record_just_before_its_span(asm: Assembler, _clock: Clock) -> None:
    # Behind a Collector the logs pipeline may deliver a record before the span it was logged
    # under: each permission check comes while the trace is bound to the other session, or to
    # its own, or to both, before its tool call's span.
    before = records_by_request()
    for n, request in enumerate(traces()):
        if n in before:
            asm.add_logs(before[n], 100 + n)
        asm.add_spans(request, 1 + n)


def held_back(names: set[str]) -> tuple[list[ExportTraceServiceRequest], ExportTraceServiceRequest]:
    """The trace requests without the spans named ``names``, and those spans in one request."""
    first: list[ExportTraceServiceRequest] = []
    later = ExportTraceServiceRequest()
    for request in traces():
        rest = ExportTraceServiceRequest()
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                kept = rest.resource_spans.add(resource=rs.resource).scope_spans.add(scope=ss.scope)
                back = later.resource_spans.add(resource=rs.resource).scope_spans.add(scope=ss.scope)
                for span in ss.spans:
                    (back if span.name in names else kept).spans.append(span)
        first.append(rest)
    return first, later


def permission_checks_before_their_spans(asm: Assembler, clock: Clock) -> None:
    # Both sessions open and bound to the trace (to the second last), every span in but the
    # permission checks' own: unheld, the first session's release-notes check went to the
    # second, a load of its own, unresolved.
    first, later = held_back({"Permission.ask"})
    for n, request in enumerate(first):
        asm.add_spans(request, 1 + n)
    all_logs(asm, clock)
    assert len(asm.early_logs) == 2  # held: their spans had not come
    asm.add_spans(later, 200)
    assert len(asm.early_logs) == 0  # each placed with its span
    for scenario in SCENARIOS.values():  # a restart replays each session's requests in order
        session = asm.get(str(scenario["session_id"]))
        assert session is not None and session.requests == sorted(set(session.requests))
        assert session.first_request == session.requests[0] and session.last_request == 200


def test_permission_checks_logged_just_before_their_span_go_to_their_own_sessions() -> None:
    assert_each_session_has_its_own_loads(run(each_record_just_before_its_span))


def test_permission_checks_logged_before_their_own_spans_go_to_their_own_sessions() -> None:
    assert_each_session_has_its_own_loads(run(permission_checks_before_their_spans))


def test_records_whose_span_never_comes_are_placed_when_their_sessions_close() -> None:
    # The span they were logged under is never sent: they go, at the close, where they would
    # have gone unheld; none is dropped.
    first, _never = held_back({"Permission.ask"})
    closed: dict[str, list[Session]] = {}
    clock = Clock()
    asm = Assembler(
        parse({"sessions": {"idle_timeout": "3s"}}).sessions,
        lambda s, _r: closed.setdefault(s.session_id, []).append(s),
        clock=clock,
    )
    for n, request in enumerate(first):
        asm.add_spans(request, 1 + n)
    accepted = sum(asm.add_logs(request, 100 + n).accepted for n, request in enumerate(logs()))
    assert accepted == sum(len(s.log_records) for r in logs() for rl in r.resource_logs for s in rl.scope_logs)
    held = len(asm.early_logs)
    assert held == 2 and asm.oldest_request() == 1
    resent = sum(asm.add_logs(request).accepted for request in logs())
    assert resent == accepted and asm.duplicates == {"logs": accepted}  # held ones too: counted once
    clock.now += 4
    assert asm.close_due() > 0
    assert len(asm.early_logs) == 0 and asm.early_logs.held_total == held
    assert sorted(closed) == sorted(str(s["session_id"]) for s in SCENARIOS.values())


def tool_calls_after_the_second_session_came(asm: Assembler, clock: Clock) -> None:
    # The tool calls' spans (keyed) and their permission checks' (no key, exported first) come
    # last, in one request, after both sessions are bound to the trace (the second last): each
    # permission check's span goes to its keyed parent's session, and its record with it.
    first, later = held_back({"Permission.ask", "Tool.execute"})
    for n, request in enumerate(first):
        asm.add_spans(request, 1 + n)
    all_logs(asm, clock)
    asm.add_spans(later, 50)
    assert len(asm.early_logs) == 0


def test_an_unkeyed_span_before_its_keyed_parent_in_its_request_joins_the_parents_session() -> None:
    assert_each_session_has_its_own_loads(run(tool_calls_after_the_second_session_came))
