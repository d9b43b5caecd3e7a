"""Session assembly: keys, trace binding, close rules, revisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.component import Retryable as Backpressure
from collector.config import Config, parse
from collector.receiver.decode import parse_json
from collector.sessions.assembler import Accepted, Assembler
from evaluators.evidence import Session
from evaluators.result import Coverage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(config: Config | None = None, **sessions: object) -> tuple[Assembler, list[tuple[Session, str]], Clock]:
    cfg = config or parse({"sessions": sessions})
    closed: list[tuple[Session, str]] = []
    clock = Clock()
    return Assembler(cfg.sessions, lambda s, r: closed.append((s, r)), clock=clock), closed, clock


def one_span(trace: int, span: int, attrs: dict[str, object] | None = None,
             resource: dict[str, str] | None = None) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for k, v in (resource or {}).items():
        rs.resource.attributes.add(key=k).value.string_value = v
    s = rs.scope_spans.add().spans.add(trace_id=trace.to_bytes(16, "big"), span_id=span.to_bytes(8, "big"), name="x")
    for k, v in (attrs or {}).items():
        if isinstance(v, bool):
            s.attributes.add(key=k).value.bool_value = v
        else:
            s.attributes.add(key=k).value.string_value = str(v)
    return req


def each_span(request: ExportTraceServiceRequest) -> list[ExportTraceServiceRequest]:
    """Split a request into one request per span, keeping resource and scope."""
    out = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                single = ExportTraceServiceRequest()
                r = single.resource_spans.add()
                r.resource.CopyFrom(rs.resource)
                sc = r.scope_spans.add()
                sc.scope.CopyFrom(ss.scope)
                sc.spans.add().CopyFrom(s)
                out.append(single)
    return out


def test_key_precedence_span_then_conversation_then_resource() -> None:
    asm, _closed, _ = make()
    asm.add_spans(one_span(1, 1, {"session.id": "A", "gen_ai.conversation.id": "B"}, {"session.id": "C"}))
    asm.add_spans(one_span(2, 2, {"gen_ai.conversation.id": "B"}, {"session.id": "C"}))
    asm.add_spans(one_span(3, 3, {}, {"session.id": "C"}))
    assert sorted(s.key for s in asm.open_sessions()) == ["A", "B", "C"]


def test_configured_keys_replace_the_defaults() -> None:
    asm, _, _ = make(keys=["span:langsmith.metadata.session_id"])
    asm.add_spans(one_span(1, 1, {"langsmith.metadata.session_id": "L", "session.id": "ignored"}))
    assert [s.key for s in asm.open_sessions()] == ["L"]


def test_adk_tool_spans_without_a_key_join_their_agents_session_even_when_exported_first() -> None:
    # ADK puts gen_ai.conversation.id on agent/LLM spans, not on execute_tool spans;
    # children end (and are exported) before parents.  Feed the real recording backwards.
    (request,) = trace_requests(FRAMEWORKS / "adk" / "right_skill_content.traces.jsonl")
    asm, closed, _ = make()
    singles = each_span(request)
    for single in reversed(singles):
        asm.add_spans(single)
    assert [s.key for s in asm.open_sessions()] == ["adk-right_skill-content"]
    asm.close_all()
    (session, _reason), = closed
    assert session.span_count == len(singles)
    assert [load.skill for load in session.skill_loads if load.status == "loaded"] == ["release-notes"]


def test_a_trace_that_never_names_a_session_is_its_own_session() -> None:
    asm, closed, _ = make()
    asm.add_spans(one_span(7, 1, {"gen_ai.operation.name": "invoke_agent"}))
    asm.add_spans(one_span(7, 2))
    asm.close_all()
    assert [(s.session_id, s.span_count) for s, _ in closed] == [(f"{7:032x}", 2)]
    assert asm.discarded == 0


def test_a_trace_that_names_no_session_and_shows_no_agent_is_counted_not_evaluated() -> None:
    asm, closed, _ = make()
    asm.add_spans(one_span(8, 1))  # a harness's housekeeping span ("auth", "fs.read_file")
    asm.add_spans(one_span(9, 1, {"session.id": "named"}))  # named: a session, empty or not
    asm.close_all()
    assert [s.session_id for s, _ in closed] == ["named"]
    assert asm.discarded == 1


def test_a_trace_that_names_no_session_but_calls_a_model_is_a_session() -> None:
    asm, closed, _ = make()
    asm.add_spans(one_span(6, 1, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}))
    asm.close_all()
    assert [s.session_id for s, _ in closed] == [f"{6:032x}"]  # content not captured: still a session
    assert asm.discarded == 0


def test_only_text_names_a_session() -> None:
    asm, closed, _ = make()
    request = one_span(5, 1, {"gen_ai.operation.name": "invoke_agent"})
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="thread.id").value.int_value = 3
    asm.add_spans(request)
    asm.close_all()
    assert [s.session_id for s, _ in closed] == [f"{5:032x}"]  # the integer named nothing


def test_idle_timeout_closes_only_idle_sessions() -> None:
    asm, closed, clock = make(idle_timeout="10s")
    asm.add_spans(one_span(1, 1, {"session.id": "old"}))
    clock.now += 6
    asm.add_spans(one_span(2, 1, {"session.id": "young"}))
    clock.now += 5
    assert asm.close_due() == 1
    assert [(s.session_id, r) for s, r in closed] == [("old", "idle_timeout")]
    clock.now += 5
    asm.close_due()
    assert [s.session_id for s, _ in closed] == ["old", "young"]


def test_end_attribute_closes_at_once() -> None:
    asm, closed, _ = make()
    asm.add_spans(one_span(1, 1, {"session.id": "s"}))
    asm.add_spans(one_span(1, 2, {"session.id": "s", "skillgauge.session.end": True}))
    assert [(s.session_id, s.span_count, r) for s, r in closed] == [("s", 2, "end_attribute")]


def test_max_duration_closes_busy_sessions() -> None:
    asm, closed, clock = make(idle_timeout="1h", max_duration="60s")
    for _ in range(7):
        asm.add_spans(one_span(1, clock.now.__int__(), {"session.id": "busy"}))
        clock.now += 10
        asm.close_due()
    assert [(s.session_id, r) for s, r in closed] == [("busy", "max_duration")]


def test_max_spans_closes_and_later_spans_open_a_new_revision() -> None:
    asm, closed, _ = make(max_spans=3)
    for i in range(5):
        asm.add_spans(one_span(1, i + 1, {"session.id": "s"}))
    assert [(s.revision, s.span_count, r) for s, r in closed] == [(1, 3, "max_spans")]
    asm.close_all()
    assert [(s.revision, s.span_count) for s, _ in closed][1] == (2, 2)
    assert asm.reopened == 1
    assert asm.closed_by_reason["max_spans"] == 1 and asm.closed_by_reason["shutdown"] == 1


def test_a_request_of_known_size_counts_an_equal_share_per_span_towards_max_bytes() -> None:
    asm, closed, _ = make(max_bytes=3000)
    request = ExportTraceServiceRequest()
    for span in range(1, 5):
        request.resource_spans.extend(one_span(1, span, {"session.id": "s"}).resource_spans)
    for _ in asm.feed(request, 1, Accepted(), raw=bytes(4000)):  # 1,000 bytes a span
        pass
    assert [(s.session_id, reason, s.span_count) for s, reason in closed] == [("s", "max_bytes", 3)]


def test_feed_pauses_by_time_not_by_span_count() -> None:
    """``feed`` yields once ``slice_seconds`` have passed since it started or last paused:
    with no time allowed it pauses before every span, with an hour never."""
    request = ExportTraceServiceRequest()
    for span in range(1, 6):
        request.resource_spans.extend(one_span(1, span, {"session.id": "s"}).resource_spans)
    eager, _, _ = make()
    assert len(list(eager.feed(request, 1, Accepted(), slice_seconds=0.0))) == 5
    patient, _, _ = make()
    assert list(patient.feed(request, 1, Accepted(), slice_seconds=3600.0)) == []
    assert eager.get("s") is not None and eager.get("s").spans == patient.get("s").spans == 5  # type: ignore[union-attr]


def test_max_bytes_closes() -> None:
    asm, closed, _ = make(max_bytes=200)
    for i in range(10):
        asm.add_spans(one_span(1, i + 1, {"session.id": "s", "pad": "x" * 50}))
        if closed:
            break
    assert closed[0][1] == "max_bytes"


def test_max_open_answers_backpressure_before_touching_anything() -> None:
    asm, _, _ = make(max_open=1)
    asm.add_spans(one_span(1, 1, {"session.id": "a"}))
    with pytest.raises(Backpressure):
        asm.admit()
    with pytest.raises(Backpressure):
        asm.add_spans(one_span(2, 1, {"session.id": "b"}))
    assert [s.key for s in asm.open_sessions()] == ["a"]


def test_a_request_that_fits_max_open_once_sessions_close_gets_backpressure_not_partial_success() -> None:
    # A partial success is final (senders must not retry it): only spans no retry could ever
    # take are rejected in part; a request that fits once open sessions close is refused whole.
    asm, _, _ = make(max_open=3)
    asm.add_spans(one_span(1, 1, {"session.id": "a"}))
    two = one_span(2, 1, {"session.id": "b"})
    two.MergeFrom(one_span(3, 1, {"session.id": "c"}))
    with pytest.raises(Backpressure, match="max_open"):
        asm.cap_new_sessions(two, promised=1)  # room for one of the two now, for both later
    assert sum(len(ss.spans) for rs in two.resource_spans for ss in rs.scope_spans) == 2  # untouched
    four = one_span(4, 1, {"session.id": "d"})
    for n in range(5, 8):
        four.MergeFrom(one_span(n, 1, {"session.id": f"s{n}"}))
    outcome = asm.cap_new_sessions(four)  # opens four sessions alone: more than max_open ever holds
    assert (outcome.over_max_open, outcome.opens) == (2, 2)


def test_every_close_is_counted_by_reason(tmp_path: Path) -> None:
    asm, _closed, clock = make(idle_timeout="5s")
    asm.add_spans(one_span(1, 1, {"session.id": "a"}))
    asm.add_spans(one_span(2, 1, {"session.id": "b", "skillgauge.session.end": True}))
    clock.now += 10
    asm.close_due()
    asm.add_spans(one_span(3, 1, {"session.id": "c"}))
    asm.close_all()
    counts = {k: v for k, v in asm.closed_by_reason.items() if v}
    assert counts == {"end_attribute": 1, "idle_timeout": 1, "shutdown": 1}
    assert json.dumps(counts)  # plain data, ready for /metrics


def test_late_spans_reopen_an_idle_closed_session_whole_as_the_next_revision() -> None:
    asm, closed, clock = make(idle_timeout="5s")
    asm.add_spans(one_span(1, 1, {"session.id": "s"}), request_id=1)
    asm.add_spans(one_span(1, 2, {"session.id": "s"}), request_id=2)
    clock.now += 10
    asm.close_due()
    asm.add_spans(one_span(1, 3, {"session.id": "s"}), request_id=7)  # a late span
    asm.close_all()
    assert [(s.revision, s.span_count, r) for s, r in closed] == [(1, 2, "idle_timeout"), (2, 3, "shutdown")]
    assert asm.reopened == 1


def test_closed_revisions_are_recorded_with_their_request_range_and_traces() -> None:
    records: list[object] = []
    cfg = parse({})
    asm = Assembler(cfg.sessions, lambda s, r: None, on_record=records.append)
    asm.add_spans(one_span(3, 1, {"session.id": "s"}), request_id=4)
    asm.add_spans(one_span(3, 2, {}), request_id=9)  # joins through its trace
    asm.close_all()
    (record,) = records
    assert (record.session, record.revision, record.first_request, record.last_request) == ("s", 1, 4, 9)  # type: ignore[attr-defined]
    assert record.traces == (f"{3:032x}",)  # type: ignore[attr-defined]


def test_a_session_handed_out_does_not_change_when_late_spans_reopen_it() -> None:
    """Judge calls for revision 1 may still run when late spans open revision 2: what they
    read must stay what revision 1 held (found by comparing inline and worker detection)."""
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda session, reason: closed.append(session))
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    asm.add_spans(request, 1)
    asm.close_all("idle_timeout")
    (first,) = closed
    before = (list(first.tool_calls), dict(first.catalog.skills), list(first.skill_loads), list(first.turns))
    assert first.tool_calls and first.catalog.skills and first.skill_loads
    late = ExportTraceServiceRequest()
    late.CopyFrom(request)
    for rs in late.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.span_id = bytes(reversed(span.span_id))  # new spans, same session and trace
    asm.add_spans(late, 2)
    asm.close_all("shutdown")
    second = closed[1]
    assert second.revision == 2 and len(second.tool_calls) == 2 * len(first.tool_calls)
    assert (first.tool_calls, first.catalog.skills, first.skill_loads, first.turns) == before


def test_a_skill_body_is_cut_to_max_skill_body_chars() -> None:
    text = (FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl").read_text()
    text = text.replace("Group the changes", "Group the changes" + "x" * 5_000)
    (request,) = [parse_json(ExportTraceServiceRequest, line.encode()) for line in text.splitlines() if line.strip()]
    asm, closed, _ = make(max_skill_body_chars=1024)
    asm.add_spans(request)
    asm.close_all()
    ((session, _),) = closed
    (loaded,) = [load for load in session.skill_loads if load.body]
    assert "xxxx" in loaded.body and len(loaded.body) < 1024 + 100
    assert loaded.body.endswith("characters cut: sessions.max_skill_body_chars ...]")
    assert asm.bodies_cut == 1 and loaded.body_cut > 5_000 - 1024
    (shown,) = [x for x in Coverage(session, []).to_dict()["skill_loads"] if x["has_body"]]
    assert shown["body_truncated"] is True and shown["body_chars_cut"] == loaded.body_cut


def test_the_same_session_id_in_two_tenants_is_two_sessions_and_never_reopens_the_other() -> None:
    asm, closed, clock = make(idle_timeout="5s")
    asm.add_spans(one_span(1, 1, {"session.id": "s"}), tenant="team-a")
    clock.now += 10
    asm.close_due()  # team-a's s closed; team-b's s must not reopen it
    asm.add_spans(one_span(2, 1, {"session.id": "s"}), tenant="team-b")
    asm.add_spans(one_span(3, 1, {"session.id": "s"}))  # the default tenant's s
    asm.close_all()
    assert [(s.tenant, s.session_id, s.revision, s.span_count) for s, _ in closed] == [
        ("team-a", "s", 1, 1), ("team-b", "s", 1, 1), ("", "s", 1, 1)
    ]
    assert asm.reopened == 0


def test_keyless_spans_join_a_session_through_their_trace_only_within_their_tenant() -> None:
    # The ADK recording's tool spans carry no key and join their agent's session through
    # the trace.  Sent again by another tenant without any key, they must not join it.
    (request,) = trace_requests(FRAMEWORKS / "adk" / "right_skill_content.traces.jsonl")
    asm, closed, _ = make()
    asm.add_spans(request, tenant="team-a")
    keyless = ExportTraceServiceRequest()
    keyless.CopyFrom(request)
    for rs in keyless.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                kept = [kv for kv in span.attributes if kv.key != "gen_ai.conversation.id"]
                del span.attributes[:]
                span.attributes.extend(kept)
    asm.add_spans(keyless, tenant="team-b")
    asm.close_all()
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    by_tenant = {s.tenant: s for s, _ in closed}
    assert by_tenant["team-a"].session_id == "adk-right_skill-content"
    assert by_tenant["team-a"].span_count == spans  # none of team-b's
    assert by_tenant["team-b"].session_id != "adk-right_skill-content"
    assert sum(s.span_count for s, _ in closed if s.tenant == "team-b") == spans


def test_a_default_tenant_id_holding_the_separator_cannot_name_another_tenants_session() -> None:
    asm, closed, _ = make()
    asm.add_spans(one_span(1, 1, {"session.id": "s"}), tenant="team-a")
    asm.add_spans(one_span(2, 1, {"session.id": "team-a\x1fs"}))
    asm.close_all()
    assert sorted((s.tenant, s.session_id, s.span_count) for s, _ in closed) == [
        ("", "team-a\x1fs", 1), ("team-a", "s", 1)
    ]


def test_the_same_spans_from_another_tenant_are_its_own_not_a_resend() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl")
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    asm, closed, _ = make()
    asm.add_spans(request, tenant="team-a")
    asm.add_spans(request, tenant="team-b")  # the same ids: team-b's own session, not a duplicate
    asm.add_spans(request, tenant="team-a")  # a re-send within team-a: taken once
    asm.close_all()
    assert sorted((s.tenant, s.span_count) for s, _ in closed) == [("team-a", spans), ("team-b", spans)]
    assert asm.duplicates.get("traces") == spans


def test_closed_sessions_kept_for_reopening_are_bounded_in_bytes_the_oldest_out_first() -> None:
    asm, closed, clock = make(idle_timeout="5s", reopen_cache_bytes=3_500)
    for n in range(1, 6):  # five sessions of about 1 KB each
        asm.add_spans(one_span(n, 1, {"session.id": f"s{n}", "pad": "x" * 1_000}), request_id=n)
    clock.now += 10
    asm.close_due()
    assert 0 < asm.recent_bytes <= 3_500
    assert asm.reopen_evicted == 2  # s1 and s2 (``skillgauge_cache_evictions_total{cache="reopen"}``)
    for n in (1, 5):  # a late span for the oldest and for the newest
        asm.add_spans(one_span(n, 2, {"session.id": f"s{n}"}), request_id=10 + n)
    asm.close_all()
    late = {s.session_id: (s.revision, s.span_count) for s, r in closed if r == "shutdown"}
    # s1 was let go: its late span makes the next revision, but without the earlier span
    assert late == {"s1": (2, 1), "s5": (2, 2)}


def test_one_request_cannot_open_sessions_past_its_tenants_own_limit() -> None:
    config = parse({})
    asm = Assembler(config.sessions, lambda s, r: None, tenant_max_open={"team-a": 3})
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in range(1, 11):
        span = spans.add(trace_id=n.to_bytes(16, "big"), span_id=n.to_bytes(8, "big"), name="x")
        span.attributes.add(key="session.id").value.string_value = f"s{n}"
    other = ExportTraceServiceRequest()
    other.CopyFrom(request)
    result = asm.cap_new_sessions(request, tenant="team-a")
    assert (result.accepted, result.over_max_open, result.opens) == (3, 7, 3)
    assert "tenant team-a's max_open_sessions (3 open)" in result.message
    asm.add_spans(request, tenant="team-a")
    assert asm.open_by_tenant == {"team-a": 3}
    with pytest.raises(Backpressure, match="tenant team-a has 3 sessions open"):
        asm.admit_tenant("team-a")
    asm.admit_tenant("team-b")  # another tenant: not held back
    assert asm.cap_new_sessions(other, tenant="team-b").accepted == 10
