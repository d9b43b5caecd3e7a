"""Any other harness: a SKILL.md read by any tool, a SKILL.md body in any tool result and a
catalog in any system instruction are found with no harness row at all, and the framework
is named from the scope or the service name when known.

Each test takes a real recording and renames what a row of facts would know (the tool, the
attribute holding the prompt, the instrumentation scope), as a harness without a row does.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session


def assemble(traces: list[ExportTraceServiceRequest]) -> Session:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    for request in traces:
        asm.add_spans(request)
    asm.close_all()
    (session,) = closed
    return session


def spans(traces: list[ExportTraceServiceRequest]):  # type: ignore[no-untyped-def]
    for request in traces:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                yield from ss.spans


def rename_tool(traces: list[ExportTraceServiceRequest], old: str, new: str) -> None:
    for span in spans(traces):
        for kv in span.attributes:
            if kv.key == "gen_ai.tool.name" and kv.value.string_value == old:
                kv.value.string_value = new
        span.name = span.name.replace(old, new)


@pytest.mark.parametrize(
    ("recording", "tool"),
    [
        ("strands/file_read", "file_read"),
        ("deepagents/right_skill", "read_file"),
        ("adk/file_read_content", "read_file"),
    ],
)
def test_a_skill_md_returned_by_a_tool_no_row_knows_is_a_read(recording: str, tool: str) -> None:
    traces = trace_requests(FRAMEWORKS / f"{recording}.traces.jsonl")
    before = [(x.skill, x.status, x.signal, x.body) for x in assemble(traces).skill_loads]
    rename_tool(traces, tool, "open_document")
    after = [(x.skill, x.status, x.signal, x.body) for x in assemble(traces).skill_loads]
    assert before and after == before


def test_a_tool_whose_name_says_it_writes_reads_nothing() -> None:
    traces = trace_requests(FRAMEWORKS / "strands" / "file_read.traces.jsonl")
    rename_tool(traces, "file_read", "save_document")
    assert assemble(traces).skill_loads == []


def test_a_catalog_in_a_system_instruction_no_row_names_is_found() -> None:
    traces = trace_requests(FRAMEWORKS / "adk" / "eager_catalog_legacy.traces.jsonl")
    expected = assemble(traces).catalog
    assert expected.state == "advertised"
    for span in spans(traces):
        for kv in span.attributes:
            if kv.key == "gcp.vertex.agent.llm_request":
                request = json.loads(kv.value.string_value)
                kv.key = "acme.llm.system_instruction"
                instruction = request.get("config", {}).get("system_instruction")
                kv.value.string_value = instruction or kv.value.string_value
    found = assemble(traces).catalog
    assert (found.state, sorted(found.skills)) == ("advertised", sorted(expected.skills))


@pytest.mark.parametrize(
    ("service", "framework"),
    # A service no row names leaves the name the scope gives itself ("acme.telemetry").
    [("gemini-cli", "gemini_cli"), ("codex_cli_rs", "codex_cli"), ("acme-agent", "acme")],
)
def test_the_framework_is_named_from_the_service_when_no_scope_names_it(service: str, framework: str) -> None:
    traces = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    for request in traces:
        for rs in request.resource_spans:
            for kv in rs.resource.attributes:
                if kv.key == "service.name":
                    kv.value.string_value = service
            for ss in rs.scope_spans:
                ss.scope.name = "acme.telemetry"
    assert assemble(traces).framework == framework
