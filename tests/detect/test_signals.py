"""Detector behaviour beyond the recordings: the Strands Evals gaps, parsers, edge cases."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from support import FRAMEWORKS, detectable, trace_requests

from collector.config import parse
from collector.detect import catalogs, shell_reads
from collector.detect.content import tool_call
from collector.detect.session import SessionEvidence
from collector.otlp.views import ResourceView, SpanView, attribute_map
from collector.replay import replay
from evaluators import skill_md
from evaluators.evidence import Session, ToolCall


def session_of(*files: str) -> Session:
    outcome = asyncio.run(replay([str(FRAMEWORKS / f) for f in files], parse({})))
    (coverage,) = outcome.coverages
    return coverage.session


# -- the three Strands Evals gaps (REFERENCE.md section 4), on real Strands 1.62 spans ---------


def test_gap1_catalog_is_read_from_chat_spans_when_invoke_agent_lacks_it() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "no_skill.traces.jsonl")
    spans = request.resource_spans[0].scope_spans[0].spans
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert "<available_skills>" not in str(agent)  # the gap: turn 1's agent span has no catalog
    session = session_of("strands/no_skill.traces.jsonl")
    assert session.catalog.state == "advertised"
    assert sorted(session.catalog.skills) == ["csv-cleanup", "incident-report", "release-notes"]


@pytest.mark.parametrize("file", ["strands/denied.traces.jsonl", "strands/denied_latest.traces.jsonl"])
def test_gap2_a_denied_call_with_no_tool_span_is_reported_denied(file: str) -> None:
    (request,) = trace_requests(FRAMEWORKS / file)
    names = [s.name for s in request.resource_spans[0].scope_spans[0].spans]
    assert not any(n.startswith("execute_tool") for n in names)  # the gap: nothing but messages
    (load,) = session_of(file).skill_loads
    assert (load.skill, load.status, load.signal) == ("incident-report", "denied", "chat_message")
    assert load.message and "approval was not granted" in load.message


@pytest.mark.parametrize("file", ["strands/missing_skill.traces.jsonl", "strands/missing_skill_latest.traces.jsonl"])
def test_gap3_a_refusal_under_success_status_is_a_failure(file: str) -> None:
    (request,) = trace_requests(FRAMEWORKS / file)
    tool = next(s for s in request.resource_spans[0].scope_spans[0].spans if s.name == "execute_tool skills")
    assert any(kv.key == "gen_ai.tool.status" and kv.value.string_value == "success" for kv in tool.attributes)
    (load,) = session_of(file).skill_loads
    assert (load.status, load.skill) == ("failed", "relese-notes")
    assert load.message and load.message.startswith("Skill 'relese-notes' not found")


def test_claude_code_unknown_skill_leaves_no_load_and_nothing_is_inferred_from_the_prompt() -> None:
    session = session_of("claude_code/missing_skill.traces.jsonl", "claude_code/missing_skill.logs.jsonl")
    assert session.skill_loads == []
    assert session.turns and "release notes" in session.turns[0].user_message.lower()  # named, yet not inferred


def test_claude_code_skill_activated_log_alone_is_a_load() -> None:
    (load,) = session_of("claude_code/right_skill.logs.jsonl").skill_loads
    assert (load.skill, load.status, load.signal, load.has_body) == ("release-notes", "loaded", "log_event", False)


def test_adk_default_mode_reports_content_capture_missing() -> None:
    session = session_of("adk/file_read.traces.jsonl", "adk/file_read.logs.jsonl")
    assert session.content_capture == "missing"
    assert session.skill_loads == []  # a file read is invisible without content; coverage says so


# -- parsers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("cat /s/pdf/SKILL.md", ["/s/pdf/SKILL.md"]),
        ("head -n 50 /s/pdf/SKILL.md", ["/s/pdf/SKILL.md"]),
        ("cd /s && cat pdf/SKILL.md | head -20", ["pdf/SKILL.md"]),
        ("sed -n '1,40p' /s/pdf/SKILL.md", ["/s/pdf/SKILL.md"]),
        ("/usr/bin/tail /s/pdf/SKILL.md", ["/s/pdf/SKILL.md"]),
        ("sed -i 's/a/b/' /s/pdf/SKILL.md", []),
        ("sed -i.bak 's/a/b/' /s/pdf/SKILL.md", []),
        ("cat /s/pdf/SKILL.md > /tmp/copy", []),
        ("echo x >> /s/pdf/SKILL.md", []),
        ("vim /s/pdf/SKILL.md", []),
        ("cp /s/pdf/SKILL.md /tmp/", []),
        ("cat 'unterminated", []),
    ],
)
def test_shell_reads_only_count_reads(command: str, paths: list[str]) -> None:
    assert shell_reads.skill_paths(command) == paths


def _call(name: str, arguments: object, result: str | None, error: str | None = None) -> ToolCall:
    return ToolCall(name, "ab" * 8, "cd" * 16, 1, arguments=json.dumps(arguments), result=result, error=error)


def test_a_shell_read_that_failed_is_not_a_load() -> None:
    load = shell_reads.detect(_call("bash", {"command": "cat /s/pdf/SKILL.md"}, "cat: /s/pdf/SKILL.md: No such file\nexit code 1"))
    assert load is not None and load.status == "failed" and load.skill == "pdf"


def test_line_numbered_skill_md_parses() -> None:
    text = "@@ lines 1-6 of 6 @@\n1\t---\n2\tname: pdf\n3\tdescription: Make PDFs.\n4\t---\n5\t\n6\tStep one."
    doc = skill_md.parse(text)
    assert (doc.name, doc.description, doc.body) == ("pdf", "Make PDFs.", "Step one.")


@pytest.mark.parametrize("text", ["", "no frontmatter", "---\nname: x\n", "---\n: [\n---\nbody", "---\nname: x\n---\nbody"])
def test_invalid_skill_md_is_rejected(text: str) -> None:
    assert skill_md.try_parse(text) is None


def test_catalog_shapes_keep_empty_apart_from_not_recorded() -> None:
    assert catalogs.find("<available_skills>\n</available_skills>") == ("available_skills_xml", [])
    assert catalogs.find("### Available skills\nNo skills are currently available.\n") == ("available_skills_markdown", [])
    assert catalogs.find("just a system prompt") is None


def test_a_catalog_indented_under_a_plain_lead_line_keeps_its_items_and_skips_deeper_notes() -> None:
    text = ("Load a skill's instructions.\n\nAvailable skills:\n"
            '  - skill("release-notes"): Write release notes.\n'
            "      - note: a line under the item, not a skill\n"
            '  - skill("csv-cleanup"): Clean a CSV file.\n\nAfter loading a skill, use bash.')
    shape, entries = catalogs.find(text) or ("", [])
    assert shape == "available_skills_markdown"
    assert [(e.name, e.description) for e in entries] == [
        ("release-notes", "Write release notes."), ("csv-cleanup", "Clean a CSV file.")]


def test_a_span_that_is_not_a_tool_yields_no_tool_call() -> None:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    rs = request.resource_spans[0]
    views = [SpanView(s, rs.scope_spans[0].scope.name, ResourceView(rs.resource)) for s in rs.scope_spans[0].spans]
    calls = [tool_call(v) for v in views]
    assert [c.name for c in calls if c] == ["skills"]


def test_replay_over_every_recording_prints_the_expected_coverage() -> None:
    run = subprocess.run([sys.executable, "-m", "collector", "replay", str(FRAMEWORKS), "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    coverage = {c["session_id"]: c for c in (json.loads(x).get("coverage") for x in run.stdout.splitlines()) if c}
    checked = 0
    for expected_file in FRAMEWORKS.glob("*/expected.json"):
        spec = json.loads(expected_file.read_text())
        for scenario in map(detectable, spec["scenarios"].values()):
            got = coverage[scenario["session_id"]]
            assert got["framework"] == spec["framework"]
            assert got["catalog"]["state"] == scenario["catalog"]["state"]
            assert sorted((x["skill"].lower(), x["status"], x["signal"], x["has_body"]) for x in got["skill_loads"]) == sorted(
                (x["skill"].lower(), x["status"], x["signal"], x["has_body"]) for x in scenario["loads"])
            checked += 1
    assert checked >= 60


def test_flattened_messages_read_in_message_order_whatever_order_the_attributes_came_in() -> None:
    """OpenInference flattens messages into llm.input_messages.<i>... keys, which may arrive
    in any order: the texts still come in message order."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from collector.detect import messages
    fields = {f"llm.input_messages.{i}.message.content": f"text {i}" for i in (10, 2, 0, 1)}
    fields |= {f"llm.input_messages.{i}.message.role": "user" for i in (10, 2, 0, 1)}
    span = Span(trace_id=b"t" * 16, span_id=b"s" * 8, name="llm")
    span.attributes.extend(KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in fields.items())
    in_order = ["text 0", "text 1", "text 2", "text 10"]
    view = SpanView(span, "openinference", ResourceView(Resource()))
    assert [text for role, text in messages.prompt_texts(view) if role == "flattened"] == in_order
    assert messages.user_texts(view) == in_order


@pytest.mark.parametrize(
    ("scenario", "status"), [("right_skill", "loaded"), ("missing_skill", "failed"), ("denied", "denied")]
)
@pytest.mark.parametrize("order", ["as_recorded", "reversed"])
def test_one_call_on_two_tool_spans_is_one_call_whichever_span_comes_first(
    scenario: str, status: str, order: str
) -> None:
    # OpenCode records each tool call twice: its own Tool.execute span (tool.name and
    # tool.call_id, nothing else) and the AI SDK's ai.toolCall span (arguments, result).
    views = []
    for request in trace_requests(FRAMEWORKS / "opencode" / f"{scenario}.traces.jsonl"):
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                views += [SpanView(s, ss.scope.name, ResourceView(rs.resource)) for s in ss.spans]
    tool_views = [v for v in views if tool_call(v) is not None]
    assert sorted(v.name for v in tool_views) == ["Tool.execute", "ai.toolCall"]
    assert len({tool_call(v).call_id for v in tool_views}) == 1  # type: ignore[union-attr]
    evidence = SessionEvidence()
    for view in tool_views if order == "as_recorded" else tool_views[::-1]:
        evidence.observe_span(view)
    session = evidence.finish("s", 1, "end_of_input")
    arguments = next(v.attrs.text("ai.toolCall.args") for v in tool_views if v.name == "ai.toolCall")
    assert [(c.name, c.arguments) for c in session.tool_calls] == [("skill", arguments)]
    assert [(load.skill, load.status) for load in session.skill_loads] == [(
        "relese-notes" if scenario == "missing_skill" else "release-notes", status
    )]
    # finishing leaves the evidence as it was: a second finish gives the same session
    assert evidence.finish("s", 1, "end_of_input").skill_loads == session.skill_loads


# -- the Claude Agent SDK under OpenInference's instrumentor (claude_agent_sdk/README.md) ------


def _query_spans(file: str) -> list[SpanView]:
    views = []
    for request in trace_requests(FRAMEWORKS / "claude_agent_sdk" / file):
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                views += [SpanView(s, ss.scope.name, ResourceView(rs.resource)) for s in ss.spans]
    return [v for v in views if v.name.startswith("ClaudeAgentSDK.")]


def test_claude_agent_sdk_each_query_span_s_plain_text_input_is_a_user_request() -> None:
    session = session_of("claude_agent_sdk/two_turns.traces.jsonl")
    assert [t.user_message for t in session.turns] == [
        "What is 2 + 2? Answer in one word.",
        "Write release notes for these merged changes: added CSV export; fixed login timeout; removed the v1 API.",
    ]
    assert session.turns[0].response == "Four."
    assert (session.turns[1].response or "").startswith("## Breaking changes")


def test_an_input_value_is_a_user_request_only_when_its_mime_type_says_plain_text() -> None:
    from collector.detect import messages

    (view,) = _query_spans("right_skill.traces.jsonl")
    assert messages.user_texts(view) == [view.attrs.get("input.value")]
    attribute_map(view.span)["input.mime_type"].string_value = "application/json"
    relabelled = SpanView(view.span, view.scope, view.resource)
    assert messages.user_texts(relabelled) == []  # read as a message list, and it is none


def test_claude_agent_sdk_skill_body_is_read_from_the_message_the_query_span_recorded_as_output() -> None:
    (view,) = _query_spans("right_skill.traces.jsonl")
    (key,) = [k for k in view.attrs.shape() if k.startswith("llm.output_messages.1.") and "content" in k]
    assert str(view.attrs.get(key)).startswith("Base directory for this skill:")
    (load,) = session_of("claude_agent_sdk/right_skill.traces.jsonl").skill_loads
    assert (load.skill, load.status, load.signal) == ("release-notes", "loaded", "skill_tool")
    assert load.body is not None and load.body.startswith("# Release notes")


# -- Gemini API requests as ADK records them (gcp.vertex.agent.llm_request / llm_response) ----


@pytest.mark.parametrize("file", ["adk/file_read_legacy.traces.jsonl", "adk_ts/list_skills.traces.jsonl"])
def test_adk_s_recorded_gemini_request_gives_the_user_request_and_its_answer(file: str) -> None:
    # {"contents": [{"role": "user", "parts": [{"text": ...}]}, ...]}; the function responses
    # it carries back (role "user" too, parts [{"functionResponse": ...}]) are no requests.
    session = session_of(file)
    (turn,) = session.turns
    assert turn.user_message.startswith("Write release notes for")
    assert (turn.response or "").startswith("## Breaking changes")


def test_a_tool_span_recording_empty_objects_as_arguments_and_result_recorded_no_content() -> None:
    # ADK for TypeScript with ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false writes "{}" for both.
    session = session_of("adk_ts/right_skill_nocontent.traces.jsonl")
    assert session.content_capture == "missing"
    (load,) = session.skill_loads
    assert (load.skill, load.status) == ("", "unresolved")  # a skill tool ran; which, and how, unknown
    listed = session_of("adk_ts/list_skills.traces.jsonl")  # no arguments, a real result: content
    assert listed.content_capture == "present" and listed.catalog.state == "advertised"


def test_crewai_s_request_is_one_turn_however_many_spans_restate_it() -> None:
    # execute crew records a run without inputs as a user message "null"; execute task,
    # execute agent and the first call llm each record the request anew (the latter two with
    # more around it), before any answer.
    (turn,) = session_of("crewai/right_skill.traces.jsonl").turns
    assert turn.user_message == (
        "Write release notes for these merged changes: added CSV export; fixed login timeout; removed the v1 API."
    )
    assert (turn.response or "").startswith("## Breaking changes")
    two = session_of("claude_agent_sdk/two_turns.traces.jsonl")  # a real second request stays one
    assert len(two.turns) == 2


@pytest.mark.parametrize("file", ["deepagents/right_skill.traces.jsonl", "deepagents_js/right_skill.traces.jsonl"])
def test_a_langgraph_answer_is_the_model_s_text_not_a_step_s_output(file: str) -> None:
    # OpenInference records LangGraph's steps as CHAIN spans whose outputs end a run: a
    # routing step's "__end__", a step's "null"; the model's text is in its LLM span's
    # {"generations": [[{"text": ...}]]}.
    (turn,) = session_of(file).turns
    assert (turn.response or "").startswith("## Breaking changes")


def test_claude_code_s_logged_reply_answers_the_turn() -> None:
    # Claude Code logs the model's reply as claude_code.assistant_response (attribute
    # "response"); without raw API bodies nothing else in its telemetry holds the answer.
    (turn,) = session_of("claude_code/right_skill.traces.jsonl", "claude_code/right_skill.logs.jsonl").turns
    assert (turn.response or "").startswith("## Breaking changes")


@pytest.mark.parametrize(
    ("files", "has_body"),
    [
        (("claude_code/slash_command.traces.jsonl", "claude_code/slash_command.logs.jsonl"), False),
        (("claude_code/slash_command_raw_bodies.traces.jsonl", "claude_code/slash_command_raw_bodies.logs.jsonl"), True),
    ],
)
def test_a_skill_the_user_invoked_is_one_load_whose_body_is_the_injection_after_it(
    files: tuple[str, str], has_body: bool
) -> None:
    # "/release-notes ...": no Skill tool call; a skill_activated log (invocation_trigger
    # user-slash), and with raw bodies the request holds the expanded body after the command.
    (load,) = session_of(*files).skill_loads
    assert (load.skill, load.status, load.signal, load.has_body) == ("release-notes", "loaded", "log_event", has_body)


def test_claude_code_without_logged_prompts_records_no_request_and_no_reply() -> None:
    # Without OTEL_LOG_USER_PROMPTS the CLI writes "<REDACTED>" for the prompt and the reply:
    # no turn, rather than a request "<REDACTED>" put before a judge.
    session = session_of(
        "claude_code/right_skill_no_prompts.traces.jsonl", "claude_code/right_skill_no_prompts.logs.jsonl"
    )
    assert session.turns == []
    (load,) = session.skill_loads
    assert (load.skill, load.status) == ("release-notes", "loaded")


@pytest.mark.parametrize(("scenario", "signal"), [("right_skill", "skill_tool"), ("slash_command", "log_event")])
def test_claude_code_without_tool_details_names_the_load_from_the_next_request(scenario: str, signal: str) -> None:
    # Without OTEL_LOG_TOOL_DETAILS no Skill span names the skill and skill_activated says
    # "custom_skill" (a redacted name, not a skill); the api_request after it carries
    # skill.name.  Before: the Skill call was two loads, both FAILED "no skill name given".
    name = f"claude_code/{scenario}_no_tool_details"
    (load,) = session_of(f"{name}.traces.jsonl", f"{name}.logs.jsonl").skill_loads
    assert (load.skill, load.status, load.signal) == ("release-notes", "loaded", signal)
