"""Tool calls and results inside model message histories, in each provider's shape, read by
one reader; a load seen as a tool span and again in a later history is one load."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.detect import messages, transcript
from collector.detect.content import parse_json
from collector.detect.transcript import MessageCall, MessageResult
from collector.otlp.views import ResourceView, SpanView
from collector.replay import replay
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session


def history_blocks(requests: list[ExportTraceServiceRequest]) -> list[MessageCall | MessageResult]:
    """The blocks of every prompt text the recording's spans hold."""
    found: list[MessageCall | MessageResult] = []
    for request in requests:
        for rs in request.resource_spans:
            resource = ResourceView(rs.resource)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for _role, raw in messages.prompt_texts(SpanView(span, ss.scope.name, resource)):
                        parsed = parse_json(raw)
                        found += transcript.blocks(parsed if parsed is not None else raw)
    return found


# (recording, the provider shape its histories are in, the skill tool called)
RECORDED_SHAPES = [
    ("adk/right_skill_legacy.traces.jsonl", "Gemini function_call / function_response parts", "load_skill"),
    (
        "adk/right_skill_content.traces.jsonl",
        "GenAI semconv tool_call / tool_call_response parts",
        "load_skill",
    ),
    (
        "openai_agents/right_skill.traces.jsonl",
        "OpenAI Responses function_call / function_call_output",
        "load_skill",
    ),
    ("strands/right_skill.traces.jsonl", "Bedrock toolUse / toolResult", "skills"),
    ("deepagents/right_skill.traces.jsonl", "LangChain tool_calls / tool messages", "read_file"),
    ("ai_sdk/right_skill_v6.traces.jsonl", "Vercel AI SDK tool-call / tool-result parts", "skill"),
]


@pytest.mark.parametrize(("recording", "shape", "tool"), RECORDED_SHAPES, ids=[r[1] for r in RECORDED_SHAPES])
def test_a_recorded_history_yields_the_skill_call_and_its_result(
    recording: str, shape: str, tool: str
) -> None:
    found = history_blocks(trace_requests(FRAMEWORKS / recording))
    calls = [b for b in found if isinstance(b, MessageCall) and b.name == tool]
    assert calls, shape
    results = {b.call_id: b for b in found if isinstance(b, MessageResult)}
    for call in calls:
        assert call.call_id and call.call_id in results, shape
        assert "release-notes" in json.dumps(call.arguments), shape
        assert results[call.call_id].text, shape


@pytest.mark.parametrize(
    "arguments",
    ['{"skill": "pdf-report"}', {"skill": "pdf-report"}],
    ids=["arguments as JSON text", "arguments as an object"],
)
def test_openai_chat_tool_calls_read_with_arguments_as_text_or_object(arguments: Any) -> None:
    history = [
        {"role": "user", "content": "make the report"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "Skill", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "Launching skill: pdf-report"},
    ]
    assert transcript.blocks(history) == [
        MessageCall("call_9", "Skill", {"skill": "pdf-report"}),
        MessageResult("call_9", "Launching skill: pdf-report", None, "", "Launching skill: pdf-report"),
    ]


def sessions(request: ExportTraceServiceRequest) -> list[Session]:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    asm.add_spans(request)
    asm.close_all()
    return closed


def rewrite_histories(request: ExportTraceServiceRequest, key: str, change: Any) -> None:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    if kv.key == key:
                        kv.value.string_value = json.dumps(change(json.loads(kv.value.string_value)))


def as_gemini_rest(value: Any) -> Any:
    """The Python SDK's snake_case parts as the REST API writes them, without call ids."""
    if isinstance(value, list):
        return [as_gemini_rest(v) for v in value]
    if isinstance(value, dict):
        renamed = {"function_call": "functionCall", "function_response": "functionResponse"}
        return {renamed.get(k, k): as_gemini_rest(v) for k, v in value.items() if k != "id"}
    return value


def drop_tool_spans(request: ExportTraceServiceRequest) -> None:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            kept = [s for s in ss.spans if not s.name.startswith("execute_tool")]
            del ss.spans[:]
            ss.spans.extend(kept)


def test_a_load_in_a_span_and_again_in_id_less_histories_is_one_load() -> None:
    (request,) = trace_requests(FRAMEWORKS / "adk" / "right_skill_legacy.traces.jsonl")
    rewrite_histories(request, "gcp.vertex.agent.llm_request", as_gemini_rest)
    (session,) = sessions(request)
    assert [(x.skill, x.status, x.signal) for x in session.skill_loads] == [
        ("release-notes", "loaded", "skill_tool")
    ]


@pytest.mark.parametrize(
    ("recording", "load"),
    [
        ("right_skill_legacy", ("release-notes", "loaded", "chat_message")),
        ("missing_skill_legacy", ("relese-notes", "failed", "chat_message")),
    ],
)
def test_an_id_less_history_alone_pairs_each_call_with_its_tools_next_result(
    recording: str, load: tuple[str, str, str]
) -> None:
    (request,) = trace_requests(FRAMEWORKS / "adk" / f"{recording}.traces.jsonl")
    rewrite_histories(request, "gcp.vertex.agent.llm_request", as_gemini_rest)
    drop_tool_spans(request)
    (session,) = sessions(request)
    assert [(x.skill, x.status, x.signal) for x in session.skill_loads] == [load]


def test_no_recording_reports_one_call_twice() -> None:
    outcome = asyncio.run(replay([str(FRAMEWORKS)], parse({})))
    for coverage in outcome.coverages:
        ids = [x.tool_call_id for x in coverage.session.skill_loads if x.tool_call_id]
        assert len(ids) == len(set(ids)), coverage.session.session_id


def test_a_skill_md_read_only_a_history_shows_is_a_read() -> None:
    # Deep Agents' read_file, its tool span not exported: the LangChain history still shows
    # the call and the SKILL.md it returned.
    requests = trace_requests(FRAMEWORKS / "deepagents" / "right_skill.traces.jsonl")
    merged = ExportTraceServiceRequest()
    for request in requests:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                kept = [s for s in ss.spans if not any(kv.key == "tool.name" for kv in s.attributes)]
                del ss.spans[:]
                ss.spans.extend(kept)
        merged.resource_spans.extend(request.resource_spans)
    (session,) = sessions(merged)
    assert [(x.skill, x.status, x.signal, x.has_body) for x in session.skill_loads] == [
        ("release-notes", "loaded", "file_read", True)
    ]
