"""Property tests and a short fuzz run: any input yields evidence or a clear rejection,
never an exception that escapes, and never changes what other sessions show."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inputs import CLEAR_REJECTIONS, TARGETS
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from support import FRAMEWORKS, trace_requests

from collector.config import parse
from collector.sessions.assembler import Assembler, check_spans
from evaluators.evidence import Session

# The keys detectors read: the interesting place for hostile values.
KEYS = [
    "session.id", "gen_ai.conversation.id", "gen_ai.tool.name", "tool.name", "tool_name", "gen_ai.operation.name",
    "openinference.span.kind", "input.value", "output.value", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.prompt",
    "gen_ai.completion", "gen_ai.skill.name", "skill_name", "file_path", "full_command", "gen_ai.tool.status",
    "error.type", "skillgauge.expected_skills", "skillgauge.session.end", "llm.input_messages.0.message.content",
    "llm.input_messages.0.message.role", "user_prompt",
]
TEXTS = st.one_of(
    st.text(max_size=200),
    st.sampled_from([
        "skills", "Skill", "load_skill", "read_file", "bash", "execute_tool", "TOOL", "AGENT", "invoke_agent",
        '{"skill_name": "x"}', '{"file_path": "/a/x/SKILL.md"}', "cat /a/SKILL.md", "---\nname: x\ndescription: y\n---\nbody",
        '[{"toolUse": {"toolUseId": "1", "name": "skills", "input": {"skill_name": 3}}}]',
        '[{"role": "user", "parts": [{"type": "tool_call", "id": null, "name": "Skill"}]}]',
        "<available_skills><skill><name></name></skill>", "### Available skills\n- : \n", '<skill name="x">',
        "Base directory for this skill: \n", "Error: boom", "true", "[", "{", "null", "\x00",
    ]),
)


def _value(draw: st.DrawFn, depth: int = 0) -> AnyValue:
    value = AnyValue()
    kind = draw(st.sampled_from(["s", "s", "s", "i", "b", "d", "bytes", "array", "kv"] if depth < 2 else ["s", "i"]))
    if kind == "s":
        value.string_value = draw(TEXTS)
    elif kind == "i":
        value.int_value = draw(st.integers(-(2**63), 2**63 - 1))
    elif kind == "b":
        value.bool_value = draw(st.booleans())
    elif kind == "d":
        value.double_value = draw(st.floats(allow_nan=True))
    elif kind == "bytes":
        value.bytes_value = draw(st.binary(max_size=20))
    elif kind == "array":
        for _ in range(draw(st.integers(0, 3))):
            value.array_value.values.add().CopyFrom(_value(draw, depth + 1))
    else:
        for _ in range(draw(st.integers(0, 3))):
            kv = value.kvlist_value.values.add(key=draw(st.sampled_from(KEYS)))
            kv.value.CopyFrom(_value(draw, depth + 1))
    return value


@st.composite
def hostile_request(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    for _ in range(draw(st.integers(0, 2))):
        rs.resource.attributes.add(key=draw(st.sampled_from(KEYS))).value.CopyFrom(_value(draw))
    ss = rs.scope_spans.add()
    ss.scope.name = draw(st.sampled_from(["", "strands.telemetry.tracer", "x" * 300, "com.anthropic.claude_code"]))
    for _ in range(draw(st.integers(1, 6))):
        span = ss.spans.add(
            trace_id=draw(st.sampled_from([b"", bytes(16), b"\x01" * 16, b"\x02" * 16, b"\x01" * 15])),
            span_id=draw(st.sampled_from([b"", bytes(8), b"\x01" * 8, b"\x02" * 8])),
            name=draw(st.sampled_from(["chat", "execute_tool skills", "execute_tool", "", "claude_code.tool"])),
            start_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
            end_time_unix_nano=draw(st.integers(0, 2**64 - 1)),
        )
        span.status.code = draw(st.integers(0, 2))
        for _ in range(draw(st.integers(0, 6))):
            span.attributes.add(key=draw(st.sampled_from(KEYS))).value.CopyFrom(_value(draw))
        for _ in range(draw(st.integers(0, 2))):
            event = span.events.add(name=draw(st.sampled_from(
                ["gen_ai.tool.message", "gen_ai.choice", "tool.output", "gen_ai.user.message",
                 "gen_ai.client.inference.operation.details"])))
            for _ in range(draw(st.integers(0, 2))):
                key = draw(st.sampled_from(["content", "message", "output", "gen_ai.input.messages"]))
                event.attributes.add(key=key).value.CopyFrom(_value(draw))
    return request


GOOD = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")[0]


def _loads(session: Session) -> list[tuple[str, str, str, bool]]:
    return [(x.skill, x.status, x.signal, x.has_body) for x in session.skill_loads]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_request())
def test_hostile_spans_never_escape_and_never_touch_other_sessions(request: ExportTraceServiceRequest) -> None:
    closed: list[Session] = []
    assembler = Assembler(parse({}).sessions, lambda session, reason: closed.append(session))
    mixed = ExportTraceServiceRequest()
    mixed.CopyFrom(GOOD)
    mixed.resource_spans.extend(request.resource_spans)
    checked = check_spans(mixed)  # what the served path answers before it spools
    result = assembler.add_spans(mixed)
    total = sum(len(ss.spans) for rs in mixed.resource_spans for ss in rs.scope_spans)
    assert result.accepted + result.rejected == total
    assert (checked.accepted, checked.rejected, checked.message) == (
        result.accepted,
        result.rejected,
        result.message,
    )
    assembler.close_all()
    good = [s for s in closed if s.session_id == "strands-right_skill-0001"]
    assert good and _loads(good[0])[:1] == [("release-notes", "loaded", "skill_tool", True)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_targets_accept_any_bytes(target: str, data: bytes) -> None:
    with contextlib.suppress(CLEAR_REJECTIONS):
        TARGETS[target](data)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
                        ["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "attributes", "key", "value",
                         "stringValue", "resourceLogs", "scopeLogs", "logRecords", "name", "kind"]), inner, max_size=4),
                    max_leaves=20))
def test_json_decoder_answers_any_json_with_a_message_or_a_rejection(data: object) -> None:
    TARGETS["otlp_json"](json.dumps(data).encode())


def test_short_fuzz_run_of_every_target() -> None:
    fuzz = Path(__file__).with_name("fuzz.py")
    run = subprocess.run([sys.executable, str(fuzz), "all", "-atheris_runs=3000"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count("Done 3000") == len(TARGETS)


def test_bytes_inside_a_kvlist_session_key_is_text_not_a_crash() -> None:
    # Found by the property test above: bytes nested in an array or kvlist broke JSON rendering.
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8)
    value = span.attributes.add(key="session.id").value
    value.kvlist_value.values.add(key="k").value.bytes_value = b"\xff\x00"
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
    closed: list[Session] = []
    assembler = Assembler(parse({}).sessions, lambda session, reason: closed.append(session))
    assert assembler.add_spans(request).accepted == 1
    assembler.close_all()
    # Only text names a session: the trace is the session, and nothing broke on the way.
    assert [s.session_id for s in closed] == ["01" * 16]
