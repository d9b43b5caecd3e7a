"""Detection by shape: each mechanism on real recordings with the table row that used to make it
work taken out of ``collector.detect.facts`` (monkeypatched), still detected.

- A skill tool no row names: its arguments name the skill whose body, acknowledgement or
  refusal its result holds; also a call only a history shows.
- A catalog no row's shape knows, in five formats: XML elements under a tag (Strands, real),
  XML entries named in their tag (CrewAI, real), a Markdown list (OpenAI Agents, real), and a
  JSON array and a YAML sequence, each derived from the real Strands recording by re-encoding
  its ``<available_skills>`` block (no recording here shows either format).
- A skill injected into the conversation without a tool call (Deep Agents' pinned skill and
  CrewAI's, both real) with the pinned-skill tag's row out.
- A redacted or empty tool output whose arguments name a catalog's skill: an unresolved load
  of that skill (derived from the real Strands recording: its result replaced by Strands' own
  redaction placeholder, or by nothing).
- The framework from what the telemetry calls itself.

And what must stay nothing: a skill's name in prose, a list of tools, tool definitions, a
folder listing, a write tool echoing a skill's name.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from support import FRAMEWORKS, detectable, trace_requests

from collector.config import parse
from collector.detect import catalog_shapes, detectors, readings, skill_shapes
from collector.detect.facts import injections as injection_facts
from collector.detect.facts import skill_tools as skill_tool_facts
from collector.replay import replay
from collector.sessions.assembler import Assembler
from evaluators.bytecache import CACHES
from evaluators.evidence import Catalog, CatalogEntry, Session, ToolCall

Row = tuple[str, str, str, bool]


def forget_texts() -> None:
    """What a text holds is kept per text (``readings``, and every other cache of what a
    text holds): after a table row is taken out, every text is read again."""
    for cache in CACHES.values():
        cache.clear()


@pytest.fixture(autouse=True)
def texts_read_again() -> Iterator[None]:
    """No text read with a row taken out stays read for the next test."""
    yield
    forget_texts()


def scenario_session(framework: str, scenario: str) -> Session:
    spec = json.loads((FRAMEWORKS / framework / "expected.json").read_text())["scenarios"][scenario]
    outcome = asyncio.run(replay([str(FRAMEWORKS / framework / f) for f in spec["files"]], parse({})))
    assert not outcome.problems
    (session,) = [c.session for c in outcome.coverages if c.session.session_id == spec["session_id"]]
    return session


def rows(session: Session) -> list[Row]:
    return sorted((x.skill, x.status, x.signal, x.has_body) for x in session.skill_loads)


def assemble(traces: list[ExportTraceServiceRequest]) -> Session:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    for request in traces:
        asm.add_spans(request)
    asm.close_all()
    (session,) = closed
    return session


def spans(traces: list[ExportTraceServiceRequest]) -> Iterator[Span]:
    for request in traces:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                yield from ss.spans


def string_values(span: Span) -> Iterator[KeyValue]:
    """Every string attribute of a span and of its events."""
    for kv in span.attributes:
        if kv.value.HasField("string_value"):
            yield kv
    for event in span.events:
        for kv in event.attributes:
            if kv.value.HasField("string_value"):
                yield kv


# -- skill tools ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "scenario", "tool", "shape"),
    [
        ("strands", "right_skill", "skills", "a body under a heading naming the skill"),
        ("agent_framework", "right_skill", "load_skill", "a SKILL.md whose front matter names it"),
        ("mastra", "right_skill", "skill", "a body under a heading naming the skill"),
        ("crewai", "right_skill", "load_skill", "a body in a tag naming the skill"),
        ("adk_ts", "right_skill", "load_skill", "a JSON result whose instructions are the body"),
        ("openai_agents", "right_skill", "load_skill", "an acknowledgement naming a catalog's skill"),
        ("strands_ts", "missing_skill", "skills", "a refusal naming the skill"),
        ("agent_framework", "missing_skill", "load_skill", "a refusal naming the skill"),
        ("crewai", "missing_skill", "load_skill", "a refusal naming the skill"),
    ],
)
def test_a_skill_tool_no_row_names_is_found_by_its_shape(
    monkeypatch: pytest.MonkeyPatch, framework: str, scenario: str, tool: str, shape: str
) -> None:
    by_row = rows(scenario_session(framework, scenario))
    assert by_row and all(signal == "skill_tool" for _, _, signal, _ in by_row), shape
    monkeypatch.delitem(skill_tool_facts.SKILL_TOOLS, tool)
    forget_texts()
    assert rows(scenario_session(framework, scenario)) == by_row, shape


def test_a_skill_call_only_a_history_shows_is_found_by_its_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # Claude Code refused the call before it ran (no tool span): only the raw request body's
    # history shows it, with "<tool_use_error>Unknown skill: relese-notes" as its result.
    by_row = rows(scenario_session("claude_code", "missing_skill_raw_bodies"))
    assert by_row == [("relese-notes", "failed", "chat_message", False)]
    monkeypatch.delitem(skill_tool_facts.SKILL_TOOLS, "Skill")
    forget_texts()
    assert rows(scenario_session("claude_code", "missing_skill_raw_bodies")) == by_row


def test_what_the_rules_make_of_skill_tools_they_cannot_tell_is_nothing_rather_than_a_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pydantic AI's load_capability refusal says "capability", never "skill", and names a
    # skill no catalog lists (a typo): by shape it is no load, not a made-up one.
    monkeypatch.delitem(skill_tool_facts.SKILL_TOOLS, "load_capability")
    forget_texts()
    assert rows(scenario_session("pydantic_ai", "missing_skill")) == []


# -- catalogs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "scenario", "format_"),
    [
        ("strands", "right_skill", "XML elements under <available_skills>"),
        ("crewai", "right_skill", 'XML entries <skill name="..">description</skill>'),
        ("openai_agents", "right_skill", "a Markdown list under a heading"),
        ("deepagents", "right_skill", "a Markdown list of bold names"),
    ],
)
def test_a_catalog_no_row_knows_is_found_by_its_shape(
    monkeypatch: pytest.MonkeyPatch, framework: str, scenario: str, format_: str
) -> None:
    by_row = scenario_session(framework, scenario).catalog
    assert by_row.state == "advertised" and by_row.source != catalog_shapes.SHAPE
    monkeypatch.setattr(readings, "CATALOG_MARKERS", ())  # every table shape out
    forget_texts()
    found = scenario_session(framework, scenario).catalog
    assert (found.state, found.source) == ("advertised", catalog_shapes.SHAPE), format_
    assert sorted(found.skills) == sorted(by_row.skills), format_
    assert all(e.description for e in found.skills.values()), format_


_XML_BLOCK = re.compile(r"<available_skills>.*?</available_skills>", re.DOTALL)


def _reencoded(encode: Any) -> list[ExportTraceServiceRequest]:
    """The real Strands recording with its catalog block re-encoded by ``encode`` (the block
    sits in JSON text there: the new one is written JSON-escaped)."""
    entries = list(scenario_session("strands", "right_skill").catalog.skills.values())
    assert len(entries) == 3
    escaped = json.dumps(encode(entries))[1:-1]
    traces = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    replaced = 0
    for span in spans(traces):
        for kv in string_values(span):
            text = kv.value.string_value
            if "<available_skills>" in text:
                kv.value.string_value = _XML_BLOCK.sub(lambda _m: escaped, text)
                replaced += 1
    assert replaced
    return traces


def _as_json(entries: list[CatalogEntry]) -> str:
    listed = [{"name": e.name, "description": e.description} for e in entries]
    return "Skills you can load (call the skill tool with a name):\n" + json.dumps(listed, indent=2)


def _as_yaml(entries: list[CatalogEntry]) -> str:
    items = "".join(f"  - name: {e.name}\n    description: {e.description}\n" for e in entries)
    return "skills:\n" + items


@pytest.mark.parametrize(("encode", "format_"), [(_as_json, "JSON array"), (_as_yaml, "YAML sequence")])
def test_a_catalog_re_encoded_from_a_real_recording_is_found_by_its_shape(
    encode: Any, format_: str
) -> None:
    catalog = assemble(_reencoded(encode)).catalog
    assert (catalog.state, catalog.source) == ("advertised", catalog_shapes.SHAPE), format_
    assert sorted(catalog.skills) == ["csv-cleanup", "incident-report", "release-notes"], format_


def test_the_operators_registry_frames_a_catalog_no_lead_calls_one_of_skills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pydantic AI lists its skills as "capabilities ... loaded using the `load_capability`
    # tool": nothing says "skill", so by shape alone it is no catalog (its row taken out).  With
    # the operator's registry (skills.paths) holding those names, it is one.
    spec = json.loads((FRAMEWORKS / "pydantic_ai" / "expected.json").read_text())["scenarios"]["no_skill"]
    files = [str(FRAMEWORKS / "pydantic_ai" / f) for f in spec["files"]]
    monkeypatch.setattr(readings, "CATALOG_MARKERS", ())
    forget_texts()
    alone = asyncio.run(replay(files, parse({})))
    assert [c.session.catalog.state for c in alone.coverages] == ["not_recorded"]
    registry = parse({"skills": {"paths": [str(FRAMEWORKS.parent / "skills")]}})
    (coverage,) = asyncio.run(replay(files, registry)).coverages
    catalog = coverage.session.catalog
    assert (catalog.state, catalog.source) == ("advertised", catalog_shapes.SHAPE)
    assert sorted(catalog.skills) == ["csv-cleanup", "incident-report", "release-notes"]


# -- injected skills -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "scenario", "path"),
    [
        ("deepagents", "pinned", "/skills/release-notes/SKILL.md"),
        ("deepagents", "pinned_langsmith", "/skills/release-notes/SKILL.md"),
        ("crewai", "pinned_skill", None),
    ],
)
def test_a_skill_injected_without_a_tool_call_is_found_by_its_shape(
    monkeypatch: pytest.MonkeyPatch, framework: str, scenario: str, path: str | None
) -> None:
    by_row = scenario_session(framework, scenario).skill_loads
    monkeypatch.setattr(injection_facts, "INJECTED_SKILL_MARKER", "\0no such marker")  # the pinned-skill row out
    forget_texts()
    (load,) = scenario_session(framework, scenario).skill_loads
    assert (load.skill, load.status, load.signal, load.path) == ("release-notes", "loaded", "injected", path)
    assert load.body and "# Release notes" in load.body
    assert [(x.skill, x.signal, x.body) for x in by_row] == [(load.skill, load.signal, load.body)]


# -- arguments without a result --------------------------------------------------------------


@pytest.mark.parametrize("output", ["[REDACTED]", ""])
def test_a_redacted_or_empty_output_is_an_unresolved_load_of_the_skill_named(
    monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    traces = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    changed = 0
    for span in spans(traces):
        if span.name == "execute_tool skills":
            for event in span.events:
                if event.name == "gen_ai.choice":
                    for kv in event.attributes:
                        if kv.key == "message":
                            kv.value.string_value = output
                            changed += 1
    assert changed == 1
    monkeypatch.delitem(skill_tool_facts.SKILL_TOOLS, "skills")
    forget_texts()
    session = assemble(traces)
    assert rows(session) == [("release-notes", "unresolved", "skill_tool", False)]


# -- framework names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scope", "service", "sdk", "framework"),
    [
        ("openinference.instrumentation.smolagents", "", "", "smolagents"),
        ("@arizeai/openinference-instrumentation-beeai", "", "", "beeai"),
        ("acme.telemetry", "unknown_service:python", "", "acme"),
        ("", "praisonai-agent", "", "praisonai_agent"),
        ("", "unknown_service", "haystack", "haystack"),
        ("", "unknown_service", "", "unknown"),
    ],
)
def test_the_framework_is_named_by_what_the_telemetry_calls_itself(
    scope: str, service: str, sdk: str, framework: str
) -> None:
    traces = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    for request in traces:
        for rs in request.resource_spans:
            for kv in rs.resource.attributes:
                if kv.key == "service.name":
                    kv.value.string_value = service
                if kv.key == "telemetry.sdk.name":
                    kv.value.string_value = sdk or "opentelemetry"
            for ss in rs.scope_spans:
                ss.scope.name = scope
                for span in ss.spans:
                    span.name = span.name.split(" ", 1)[0] if "." not in span.name else "x"
    assert assemble(traces).framework == framework


# -- what is no load and no catalog ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Please write the release notes; I think the release-notes skill: it is the one we use.",
        "Available tools:\n- read_file: Read a file from the workspace.\n- bash: Run a shell command.",
        '[{"name": "release-notes", "description": "Write release notes.", "parameters": {"type": "object"}}]',
        "skills/\n  release-notes/\n    SKILL.md\n  csv-cleanup/\n    SKILL.md",
        "Skills we ship:\n- Step 1: read the skill\n- Step 2: Follow It",
        '<skill name="release-notes" path="/skills/release-notes/SKILL.md">\n# Release notes\n\n1. Group.\n</skill>',
    ],
    ids=["prose", "tool list", "tool definitions", "folder listing", "numbered steps", "a pinned body"],
)
def test_prose_tools_listings_and_bodies_are_no_catalog(text: str) -> None:
    assert catalog_shapes.find(text) is None
    assert catalog_shapes.find(json.dumps({"content": text})) is None


def _call(name: str, arguments: str, result: str | None) -> ToolCall:
    return ToolCall(name=name, span_id="01", trace_id="02", start_unix_nano=1, arguments=arguments, result=result)


_CATALOG = Catalog()
_CATALOG.advertise([CatalogEntry("release-notes", "Write release notes from merged changes.")], "test")


@pytest.mark.parametrize(
    "call",
    [
        _call("write_file", '{"name": "release-notes", "content": "# Release notes"}', "Wrote release-notes"),
        _call("search_docs", '{"query": "release notes"}', "# Release notes\n\nNothing found."),
        _call("ls", '{"path": "skills/release-notes"}', "SKILL.md"),
        _call("get_weather", '{"city": "paris"}', "Sunny in paris"),
    ],
    ids=["a write echoing the name", "a query in prose", "a folder listing", "an unrelated tool"],
)
def test_a_tool_that_only_mentions_a_skill_loads_nothing(call: ToolCall) -> None:
    assert detectors.claims(call) == []
    assert skill_shapes.detect_named(call, _CATALOG, {}) is None


def test_a_registry_name_frames_a_catalog_no_lead_line_calls_one_of_skills() -> None:
    text = "You may load these:\n- release-notes: Write release notes.\n- csv-cleanup: Tidy CSV files."
    assert catalog_shapes.find(text) is None
    found = catalog_shapes.find(text, {"release-notes": "release-notes"})
    assert found is not None and [e.name for e in found] == ["release-notes", "csv-cleanup"]


def test_with_the_operators_registry_every_recording_still_matches_its_ground_truth() -> None:
    # The registry's names frame catalogs and name skills by themselves: none of it may turn
    # a recording's prose, tool lists or bodies into loads or catalogs its recorder did not see.
    config = parse({"skills": {"paths": [str(FRAMEWORKS.parent / "skills")]}})
    differ = []
    for expected in sorted(FRAMEWORKS.glob("*/expected.json")):
        for name, recorded in json.loads(expected.read_text())["scenarios"].items():
            spec = detectable(recorded)
            outcome = asyncio.run(replay([str(expected.parent / f) for f in spec["files"]], config))
            (session,) = [c.session for c in outcome.coverages if c.session.session_id == spec["session_id"]]
            got = sorted((x.skill.lower(), x.status, x.signal, x.has_body) for x in session.skill_loads)
            want = sorted((x["skill"].lower(), x["status"], x["signal"], bool(x["has_body"])) for x in spec["loads"])
            if got != want or session.catalog.state != spec["catalog"]["state"]:
                differ.append(f"{expected.parent.name}/{name}")
    assert differ == []
