"""Sessions by shape: a run named only by an attribute no configured key lists is still one
session, and a trace with skill evidence that nothing names is a session of its own.

Each test takes a real recording and moves its session id where no configured key looks
(renamed to a vendor's ``acme.conversation_id``, or its row taken out of ``sessions.keys``),
then checks the run assembles into the session its ground truth names, with the loads its
ground truth lists; and, with keys by shape turned off, that it then does not (the test
could fail).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from support import FRAMEWORKS

from collector.config import parse
from collector.detect.facts import sessions as session_facts
from collector.otlp.views import ResourceView, SpanView
from collector.receiver.decode import parse_json
from collector.replay import replay
from collector.sessions.assembler import Assembler
from collector.sessions.keys import SessionKeys, shaped_keys
from evaluators.evidence import Session

SESSION_ATTRIBUTES = {key.split(":", 1)[1] for key in session_facts.SESSION_KEYS}


def scenario_of(framework: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((FRAMEWORKS / framework / "expected.json").read_text())["scenarios"][name]
    return spec


def renamed(framework: str, files: list[str], names: dict[str, str], into: Path) -> list[str]:
    """The recording's files with attributes renamed (``names``: old -> new) wherever they
    sit (resource, span, span event, log record), written under ``into``."""

    def rename(attributes: list[dict[str, Any]]) -> None:
        for attribute in attributes:
            attribute["key"] = names.get(attribute["key"], attribute["key"])

    written = []
    for name in files:
        lines = []
        for line in (FRAMEWORKS / framework / name).read_text().splitlines():
            request = json.loads(line)
            for resource in request.get("resourceSpans", []) + request.get("resourceLogs", []):
                rename(resource.get("resource", {}).get("attributes", []))
                for scope in resource.get("scopeSpans", []) + resource.get("scopeLogs", []):
                    for item in scope.get("spans", []) + scope.get("logRecords", []):
                        rename(item.get("attributes", []))
                        for event in item.get("events", []):
                            rename(event.get("attributes", []))
            lines.append(json.dumps(request))
        (into / name).write_text("\n".join(lines) + "\n")
        written.append(str(into / name))
    return written


def sessions_of(paths: list[str], config: dict[str, Any]) -> list[Session]:
    outcome = asyncio.run(replay(paths, parse(config)))
    assert outcome.problems == []
    return [c.session for c in outcome.coverages]


def load_rows(loads: list[Any]) -> list[tuple[str, str, str, bool]]:
    return sorted(
        (x["skill"].lower(), x["status"], x["signal"], bool(x["has_body"]))
        if isinstance(x, dict)
        else (x.skill.lower(), x.status, x.signal, x.has_body)
        for x in loads
    )


def keys_without(*rows: str) -> dict[str, Any]:
    assert all(row in session_facts.SESSION_KEYS for row in rows)
    return {"sessions": {"keys": [k for k in session_facts.SESSION_KEYS if k not in rows]}}


def test_a_run_named_only_by_a_vendor_conversation_id_survives_whole(tmp_path: Path) -> None:
    """Gemini CLI's default telemetry makes every span the root of its own trace: only the
    session id ties the run together.  Renamed to acme.conversation_id, it still does."""
    scenario = scenario_of("gemini_cli", "right_skill")
    present = SESSION_ATTRIBUTES & set((FRAMEWORKS / "gemini_cli" / scenario["files"][0]).read_text().split('"'))
    assert present  # the recording names its session under configured keys
    paths = renamed("gemini_cli", scenario["files"], dict.fromkeys(present, "acme.conversation_id"), tmp_path)
    text = "".join(Path(p).read_text() for p in paths)
    assert not any(f'"{key}"' in text for key in SESSION_ATTRIBUTES)  # no configured key is left

    (session,) = sessions_of(paths, {})
    assert session.session_id == scenario["session_id"]
    assert session.key_source == "shape:acme.conversation_id"
    assert load_rows(session.skill_loads) == load_rows(scenario["loads"])
    assert session.catalog.state == scenario["catalog"]["state"]
    assert [t.user_message for t in session.turns] == scenario["user_requests"]

    split = sessions_of(paths, {"sessions": {"keys_by_shape": False}})
    assert len(split) > 1 and scenario["session_id"] not in {s.session_id for s in split}


@pytest.mark.parametrize(
    ("framework", "name", "rows"),
    [
        ("codex_cli", "right_skill_traces", ("span:conversation.id", "span:thread_id", "span:thread.id")),
        ("openllmetry", "right_skill", ("span:traceloop.association.properties.session_id",)),
        ("deepagents", "right_skill_langsmith", ("span:langsmith.metadata.session_id",)),
        ("ai_sdk", "right_skill_v6", ("span:ai.telemetry.metadata.sessionId",)),
    ],
)
def test_a_harness_whose_key_row_is_removed_is_keyed_by_shape(
    framework: str, name: str, rows: tuple[str, ...]
) -> None:
    scenario = scenario_of(framework, name)
    paths = [str(FRAMEWORKS / framework / f) for f in scenario["files"]]
    (session,) = [s for s in sessions_of(paths, keys_without(*rows)) if s.session_id == scenario["session_id"]]
    assert session.key_source.startswith("shape:")
    assert load_rows(session.skill_loads) == load_rows(scenario["loads"])
    assert session.catalog.state == scenario["catalog"]["state"]

    unshaped = sessions_of(paths, {"sessions": {**keys_without(*rows)["sessions"], "keys_by_shape": False}})
    assert scenario["session_id"] not in {s.session_id for s in unshaped}


def test_a_trace_with_skill_evidence_that_nothing_names_is_its_own_session_counted() -> None:
    """Strands' run with its session.id renamed to a name no rule reads: one trace, kept as
    a session of its own (not dropped as housekeeping), counted, and its coverage says so."""
    scenario = scenario_of("strands", "right_skill")
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    for line in (FRAMEWORKS / "strands" / scenario["files"][0]).read_text().splitlines():
        request = parse_json(ExportTraceServiceRequest, line.replace('"session.id"', '"acme.run"').encode())
        asm.add_spans(request)
    asm.close_all()
    (session,) = closed
    assert session.key_source == "trace" and session.session_id != scenario["session_id"]
    assert load_rows(session.skill_loads) == load_rows(scenario["loads"])
    assert asm.unkeyed == 1 and asm.discarded == 0


def one_span(attributes: dict[str, str]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=(7).to_bytes(16, "big"), span_id=(7).to_bytes(8, "big"), name="step"
    )
    for key, value in attributes.items():
        span.attributes.add(key=key).value.string_value = value
    return request


@pytest.mark.parametrize(
    ("attributes", "kept"),
    [
        ({"http.route": "/health"}, False),  # housekeeping: nothing of an agent, no skill
        ({"acme.skill": "release-notes"}, True),  # an attribute named for a skill: skill evidence
    ],
)
def test_only_a_trace_without_skill_evidence_is_dropped_as_housekeeping(
    attributes: dict[str, str], kept: bool
) -> None:
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    asm.add_spans(one_span(attributes))
    asm.close_all()
    assert (len(closed), asm.unkeyed, asm.discarded) == ((1, 1, 0) if kept else (0, 0, 1))


def test_a_shaped_key_yields_to_the_configured_key_of_its_trace() -> None:
    """An id a harness records for something else on a few spans (here a sub-step's
    thread_id) does not split a run its configured key names."""
    closed: list[Session] = []
    asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
    first, second = one_span({"acme.thread_id": "T"}), one_span({"session.id": "S"})
    second.resource_spans[0].scope_spans[0].spans[0].span_id = (8).to_bytes(8, "big")
    asm.add_spans(first)  # the child, exported first, names only the shaped key
    asm.add_spans(second)
    third = one_span({"acme.thread_id": "T"})
    third.resource_spans[0].scope_spans[0].spans[0].trace_id = (9).to_bytes(16, "big")
    asm.add_spans(third)  # a later trace under the shaped key: the same run
    asm.close_all()
    (session,) = closed
    assert (session.session_id, session.key_source, session.span_count) == ("S", "configured:session.id", 3)


def test_key_names_shaped_like_a_session_key() -> None:
    names = (
        "acme.conversation_id",
        "gen_ai.conversation.id",
        "ai.telemetry.metadata.sessionId",
        "my-app.session.id",
        "lg.thread_id",
        "parent_session_id",  # another run's
        "thread.name",
        "sessionid_count",
        "http.route",
    )
    assert set(shaped_keys(names)) == {
        "acme.conversation_id",
        "gen_ai.conversation.id",
        "ai.telemetry.metadata.sessionId",
        "my-app.session.id",
        "lg.thread_id",
    }
    assert shaped_keys(("x.thread_id", "x.session_id", "x.conversation_id")) == (
        "x.conversation_id",
        "x.session_id",
        "x.thread_id",
    )
    request = one_span({"acme.thread.id": "1"})
    span = request.resource_spans[0].scope_spans[0].spans[0]
    attributes, resource = SpanView(span, "", ResourceView(Resource())).attrs, ResourceView(Resource()).attrs
    found = SessionKeys(("span:session.id",)).find(attributes, resource)
    assert found is not None and (found.value, found.source) == ("1", "shape")
    assert SessionKeys(("span:session.id",), by_shape=False).find(attributes, resource) is None
