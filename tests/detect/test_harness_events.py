"""Harness events name the skill: activation log records (Claude Code ``skill_activated``,
Codex CLI ``codex.skill_invocation``) and GenAI semconv ``gen_ai.skill.*`` attributes on
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
