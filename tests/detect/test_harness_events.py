"""Harness events name the skill: activation log records (Claude Code ``skill_activated``,
Codex CLI ``codex.skill_invocation``), activation span events (Copilot CLI
``github.copilot.skill.invoked``) and GenAI semconv ``gen_ai.skill.*`` attributes on
``execute_tool`` spans, whatever the tool is called; a load is loaded only when the harness
shows it succeeded."""

from __future__ import annotations

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.receiver.decode import parse_json
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session


def logs_of(path: str) -> list[ExportLogsServiceRequest]:
    lines = (FRAMEWORKS / path).read_text().splitlines()
    return [parse_json(ExportLogsServiceRequest, line.encode()) for line in lines if line.strip()]


def assemble(traces: list[ExportTraceServiceRequest], logs: list[ExportLogsServiceRequest]) -> list[Session]:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    for request in traces:
        asm.add_spans(request)
    for request_logs in logs:
        asm.add_logs(request_logs)
    asm.close_all()
    return closed


def records(logs: list[ExportLogsServiceRequest]):  # type: ignore[no-untyped-def]
    for request in logs:
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                yield from sl.log_records


def attribute(record, key: str):  # type: ignore[no-untyped-def]
    return next((kv for kv in record.attributes if kv.key == key), None)


def test_an_activation_record_alone_is_a_load() -> None:
    # Claude Code's logs without its traces (OTEL_TRACES_EXPORTER unset).
    (session,) = assemble([], logs_of("claude_code/right_skill.logs.jsonl"))
    assert [(x.skill, x.status, x.signal) for x in session.skill_loads] == [
        ("release-notes", "loaded", "log_event")
    ]


def test_codex_skill_invocation_names_the_skill() -> None:
    # The same activation as Codex CLI writes it: event codex.skill_invocation, skill.name.
    logs = logs_of("claude_code/right_skill.logs.jsonl")
    for record in records(logs):
        event = attribute(record, "event.name")
        if event is not None and event.value.string_value == "skill_activated":
            event.value.string_value = "codex.skill_invocation"
    (session,) = assemble([], logs)
    assert [(x.skill, x.status, x.signal) for x in session.skill_loads] == [
        ("release-notes", "loaded", "log_event")
    ]


def test_an_activation_the_harness_says_failed_is_not_loaded() -> None:
    logs = logs_of("claude_code/right_skill.logs.jsonl")
    for record in records(logs):
        event = attribute(record, "event.name")
        if event is not None and event.value.string_value == "skill_activated":
            record.attributes.add(key="success").value.string_value = "false"
    (session,) = assemble([], logs)
    assert [(x.skill, x.status) for x in session.skill_loads] == [("release-notes", "failed")]


def rename_tool(requests: list[ExportTraceServiceRequest], old: str, new: str) -> None:
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for kv in span.attributes:
                        if kv.key == "gen_ai.tool.name" and kv.value.string_value == old:
                            kv.value.string_value = new
                    span.name = span.name.replace(old, new)


def test_gen_ai_skill_attributes_name_the_load_of_a_tool_no_harness_row_knows() -> None:
    # ADK's default telemetry (no content): its load_skill spans, the tool renamed so that
    # no row of facts knows it; the resource load beside it is no skill load.
    traces = trace_requests(FRAMEWORKS / "adk" / "resource.traces.jsonl")
    rename_tool(traces, "load_skill_resource", "fetch_skill_file")
    rename_tool(traces, "load_skill", "use_skill")
    (session,) = assemble(traces, [])
    assert [(x.skill, x.status, x.signal) for x in session.skill_loads] == [
        ("csv-cleanup", "loaded", "skill_attribute")
    ]


def test_gen_ai_skill_name_on_a_failed_call_is_a_failed_load() -> None:
    traces = trace_requests(FRAMEWORKS / "adk" / "missing_skill.traces.jsonl")
    rename_tool(traces, "load_skill", "use_skill")
    (session,) = assemble(traces, [])
    assert [(x.skill, x.status) for x in session.skill_loads] == [("relese-notes", "failed")]


# -- activations recorded as span events (Copilot CLI's github.copilot.skill.invoked) -----

COPILOT = "copilot_cli"
RELEASE_BODY_START = "# Release notes\n\n1. Group the changes"


def spans_of(requests: list[ExportTraceServiceRequest]):  # type: ignore[no-untyped-def]
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                yield ss.spans


def drop_spans(requests: list[ExportTraceServiceRequest], prefix: str) -> None:
    """Leave out the spans whose name starts with ``prefix`` (as a sampler would)."""
    for spans in spans_of(requests):
        kept = [span for span in spans if not span.name.startswith(prefix)]
        del spans[:]
        spans.extend(kept)


def drop_events(requests: list[ExportTraceServiceRequest], name: str) -> None:
    for spans in spans_of(requests):
        for span in spans:
            kept = [event for event in span.events if event.name != name]
            del span.events[:]
            span.events.extend(kept)


def loads(session: Session) -> list[tuple[str, str, str, str]]:
    return [(x.skill, x.status, x.signal, (x.body or "")[: len(RELEASE_BODY_START)]) for x in session.skill_loads]


def test_an_activation_event_settles_a_skill_call_that_recorded_no_result() -> None:
    # Content capture off: the skill span has the name and status OK, no result.
    traces = trace_requests(FRAMEWORKS / COPILOT / "right_skill_no_content.traces.jsonl")
    (session,) = assemble(traces, [])
    assert loads(session) == [("release-notes", "loaded", "skill_tool", "")]
    drop_events(traces, "github.copilot.skill.invoked")
    (session,) = assemble(traces, [])
    assert loads(session) == [("release-notes", "unresolved", "skill_tool", "")]


def test_the_body_an_activation_event_carries_is_the_loads_body_not_the_acknowledgement() -> None:
    traces = trace_requests(FRAMEWORKS / COPILOT / "right_skill.traces.jsonl")
    (session,) = assemble(traces, [])
    assert loads(session) == [("release-notes", "loaded", "skill_tool", RELEASE_BODY_START)]
    # Without the event, the tool's one-line 'Skill "release-notes" loaded successfully. ...'
    # (88 characters, naming the skill) is an acknowledgement, not a body.
    drop_events(traces, "github.copilot.skill.invoked")
    (session,) = assemble(traces, [])
    assert loads(session) == [("release-notes", "loaded", "skill_tool", "")]


def test_an_activation_event_alone_is_a_load_with_its_body() -> None:
    # The tool spans sampled out: the agent span's event still records the load.
    traces = trace_requests(FRAMEWORKS / COPILOT / "right_skill.traces.jsonl")
    drop_spans(traces, "execute_tool")
    (session,) = assemble(traces, [])
    assert loads(session) == [("release-notes", "loaded", "log_event", RELEASE_BODY_START)]


def test_a_catalog_of_names_alone_is_advertised_and_described_when_a_description_comes() -> None:
    traces = trace_requests(FRAMEWORKS / COPILOT / "missing_skill_no_content.traces.jsonl")
    (session,) = assemble(traces, [])
    assert session.catalog.state == "advertised"
    assert {"csv-cleanup", "incident-report", "release-notes"} <= set(session.catalog.skills)
    assert all(not entry.description for entry in session.catalog.skills.values())
    # With content: the agent span (its names) first, the chat spans (the described XML) after.
    traces = trace_requests(FRAMEWORKS / COPILOT / "missing_skill.traces.jsonl")
    for spans in spans_of(traces):
        ordered = sorted(spans, key=lambda span: span.name != "invoke_agent")
        del spans[:]
        spans.extend(ordered)
    (session,) = assemble(traces, [])
    assert session.catalog.skills["release-notes"].description.startswith("Write release notes")


def test_a_harness_preamble_is_not_part_of_the_users_request() -> None:
    traces = trace_requests(FRAMEWORKS / COPILOT / "right_skill.traces.jsonl")
    (session,) = assemble(traces, [])
    assert [turn.user_message for turn in session.turns] == [
        "Write release notes for these merged changes: added CSV export; fixed login timeout; "
        "removed the v1 API."
    ]


# -- GenAI semconv message events (OpenLLMetry's use_attributes=False) ---------------------


def test_logged_message_events_alone_give_the_request_answer_catalog_and_load() -> None:
    # The traces not exported: the anthropic instrumentation's gen_ai.*.message and
    # gen_ai.choice records, each message in its body, are the whole conversation.
    (session,) = assemble([], logs_of("openllmetry/right_skill_events.logs.jsonl"))
    assert session.catalog.state == "advertised" and "release-notes" in session.catalog.skills
    assert [turn.user_message[:29] for turn in session.turns] == ["Write release notes for these"]
    assert (session.turns[0].response or "").startswith("## Breaking changes")
    assert loads(session) == [("release-notes", "loaded", "chat_message", RELEASE_BODY_START)]


def test_a_logged_message_without_content_records_nothing() -> None:
    logs = logs_of("openllmetry/right_skill_events.logs.jsonl")
    for record in records(logs):
        record.body.kvlist_value.Clear()  # what content capture off leaves: the event alone
    assert assemble([], logs) == []  # a trace showing nothing at work is no session
    traces = trace_requests(FRAMEWORKS / "openllmetry" / "right_skill_events.traces.jsonl")
    (with_empty,) = assemble(traces, logs)
    (without,) = assemble(trace_requests(FRAMEWORKS / "openllmetry" / "right_skill_events.traces.jsonl"), [])
    assert (with_empty.turns, with_empty.catalog, with_empty.content_capture) == (
        without.turns,
        without.catalog,
        without.content_capture,
    )
    assert loads(with_empty) == loads(without)
