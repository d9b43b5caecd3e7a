"""Skill names are names: decoded out of JSON text, never a value that breaks the name rule,
never a loaded skill without one."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.detect import names
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session, fold_skill_name

# The rule is a text rule: a table of the values harnesses were seen to report.
NAMES = [
    ("pdf-report", True),
    ("a", True),
    ("x" * 64, True),
    ("x" * 65, False),
    ("my-plugin:pdf-report", True),  # Claude Code plugin skills
    ("anthropic/pdf-report", True),
    ("", False),
    ("-pdf", False),
    ("pdf-", False),
    ("pdf--report", False),
    ("PDF-Report", False),  # unless a catalog advertises it
    ("pdf report", False),
    ('{"name":"pdf-report"}', False),
    ("/home/u/.gemini/skills/pdf-report/SKILL.md", False),
    ("plugin:", False),
    ("Please load the release notes skill", False),
]


@pytest.mark.parametrize(("value", "ok"), NAMES)
def test_the_name_rule(value: str, ok: bool) -> None:
    assert names.plausible(value) is ok


def test_a_name_the_catalog_advertises_is_a_name_in_any_case() -> None:
    advertised = {fold_skill_name("PDF_Report")}
    assert names.plausible("PDF_Report", advertised)
    assert names.plausible("pdf-report", advertised)
    assert not names.plausible("Other_Skill", advertised)


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("pdf-report", "pdf-report"),
        ("  pdf-report\n", "pdf-report"),
        ('{"name":"pdf-report"}', "pdf-report"),  # what Gemini CLI's activate_skill was reported as
        ('"{\\"name\\": \\"pdf-report\\"}"', "pdf-report"),  # one level deeper
        ({"skill": "pdf-report"}, "pdf-report"),
        ('{"other": 1}', ""),
        (3, ""),
    ],
)
def test_a_name_is_decoded_from_json_text(value: object, name: str) -> None:
    assert names.decoded(value) == name


def closed_sessions(request: ExportTraceServiceRequest) -> list[Session]:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    asm.add_spans(request)
    asm.close_all()
    return closed


def set_arguments(request: ExportTraceServiceRequest, tool: str, arguments: str) -> None:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                attrs = {kv.key: kv for kv in span.attributes}
                if "gen_ai.tool.name" in attrs and attrs["gen_ai.tool.name"].value.string_value == tool:
                    attrs["gen_ai.tool.call.arguments"].value.string_value = arguments


def test_arguments_recorded_as_json_inside_a_json_string_name_the_skill() -> None:
    # ADK's real load_skill span, its arguments written the way Gemini CLI's were: the
    # argument object as JSON text inside a JSON string.
    (request,) = trace_requests(FRAMEWORKS / "adk" / "right_skill_content.traces.jsonl")
    set_arguments(request, "load_skill", json.dumps(json.dumps({"skill_name": "release-notes"})))
    (session,) = closed_sessions(request)
    assert [(x.skill, x.status) for x in session.skill_loads] == [("release-notes", "loaded")]


def test_a_value_that_is_no_name_is_not_reported_and_does_not_load() -> None:
    (request,) = trace_requests(FRAMEWORKS / "adk" / "right_skill_content.traces.jsonl")
    set_arguments(request, "load_skill", json.dumps({"skill_name": "Please load release notes"}))
    (session,) = closed_sessions(request)
    ((skill, status, message),) = [(x.skill, x.status, x.message) for x in session.skill_loads]
    assert (skill, status) == ("", "failed")
    assert message is not None and "Please load release notes" in message


def test_adk_content_mode_gives_no_loaded_skill_without_a_name() -> None:
    (request,) = trace_requests(FRAMEWORKS / "adk" / "empty_name_content.traces.jsonl")
    (session,) = closed_sessions(request)
    assert [(x.skill, x.status) for x in session.skill_loads] == [("", "failed")]
