"""Why a skill was expected is recorded as detection finds it: the rule's pattern and the
words it matched, or the attribute and the span or resource that carried it."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.detect.expectations import Rules
from collector.sessions.assembler import Assembler
from evaluators.evidence import Because, Session
from evaluators.result import Coverage


def _span(attrs: dict[str, str], resource: dict[str, str]) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for k, v in resource.items():
        rs.resource.attributes.add(key=k).value.string_value = v
    span = rs.scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="invoke_agent")
    for k, v in attrs.items():
        span.attributes.add(key=k).value.string_value = v
    return req


def _closed(expectations: list[dict[str, object]], *requests: ExportTraceServiceRequest) -> Session:
    config = parse({"expectations": expectations})
    closed: list[Session] = []
    assembler = Assembler(config.sessions, lambda s, _: closed.append(s), rules=Rules.compile(config.expectations))
    for request in requests:
        assembler.add_spans(request)
    assembler.close_all()
    (session,) = closed
    return session


def test_an_attribute_rule_and_a_declared_skill_say_where_they_were_found() -> None:
    session = _closed(
        [{"when": {"attribute": {"app.workflow": "postmortem"}}, "expect": "incident-report"}],
        _span(
            {"session.id": "s1", "app.workflow": "postmortem"},
            {"service.name": "agent", "skillgauge.expected_skills": '["pdf", "csv-cleanup"]'},
        ),
    )
    assert session.expected_skills == ["pdf", "csv-cleanup", "incident-report"]
    span = "span 'invoke_agent' (0202020202020202)"
    declared = Because(
        "expected_skills", "skillgauge.expected_skills", '["pdf", "csv-cleanup"]', "the resource of span 0202020202020202"
    )
    assert session.expected_because["pdf"] == declared
    assert session.expected_because["incident-report"] == Because(
        "attribute", "app.workflow=postmortem", "app.workflow=postmortem", span
    )
    why = Coverage(session).to_dict()["expectations"]["why"]
    assert why["incident-report"]["where"] == span


def test_a_message_rule_names_the_turn_and_the_words_it_matched() -> None:
    requests = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    session = _closed([{"when": {"user_message": "(?i)release notes"}, "expect": ["release-notes"]}], *requests)
    because = session.expected_because["release-notes"]
    assert (because.rule, because.pattern, because.where) == ("user_message", "(?i)release notes", "turn 1")
    assert "release notes" in because.matched.lower() and because.matched in session.turns[0].user_message
    turns = Coverage(session).to_dict()["turns"]
    assert turns[0]["request"] == session.turns[0].user_message
