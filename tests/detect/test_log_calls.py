"""Tool calls that log records report, on real recordings: a logged call completes the tool span
of the same call (one call, not two; Gemini CLI), stands alone when the harness refused it
before it ran (no tool span), and a record that holds the tool's output is the whole call
(Codex CLI, logs only)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from support import FRAMEWORKS

from collector.config import parse
from collector.replay import replay
from evaluators.evidence import Session

GEMINI = FRAMEWORKS / "gemini_cli"
CODEX = FRAMEWORKS / "codex_cli"


def session(scenario: str, folder: Path = GEMINI, suffixes: tuple[str, ...] = ("traces", "logs")) -> Session:
    outcome = asyncio.run(
        replay([str(folder / f"{scenario}.{suffix}.jsonl") for suffix in suffixes], parse({}))
    )
    (coverage,) = outcome.coverages
    return coverage.session


def spans_named(scenario: str, name: str) -> list[dict[str, str]]:
    found = []
    for line in (GEMINI / f"{scenario}.traces.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                found += [s for s in ss["spans"] if s["name"] == name]
    return found


def test_a_tool_span_without_arguments_takes_them_from_its_log_record() -> None:
    (tool_span,) = spans_named("right_skill", "tool_call")
    (call,) = [c for c in session("right_skill").tool_calls if c.name == "activate_skill"]
    assert call.span_id == tool_span["spanId"]
    assert call.arguments is not None and json.loads(call.arguments) == {"name": "release-notes"}
    assert call.error is None


def test_a_tool_span_with_its_own_content_is_not_doubled_by_its_log_record() -> None:
    (tool_span,) = spans_named("right_skill_traces", "tool_call")
    calls = [c for c in session("right_skill_traces").tool_calls if c.name == "activate_skill"]
    assert [c.span_id for c in calls] == [tool_span["spanId"]]


def test_a_call_refused_before_it_ran_is_a_call_of_its_own() -> None:
    assert spans_named("denied_policy", "tool_call") == []
    (scheduler,) = spans_named("denied_policy", "schedule_tool_calls")
    (call,) = session("denied_policy").tool_calls
    assert (call.name, call.span_id, call.trace_id) == (
        "activate_skill",
        scheduler["spanId"],
        scheduler["traceId"],
    )
    assert call.error is not None and "denied by policy" in call.error


def test_a_record_holding_the_tool_output_is_the_whole_call() -> None:
    records = []
    for line in (CODEX / "shell_read.logs.jsonl").read_text().splitlines():
        for rl in json.loads(line)["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for record in sl["logRecords"]:
                    attrs = {a["key"]: a["value"].get("stringValue") for a in record.get("attributes", [])}
                    if attrs.get("event.name") == "codex.tool_result":
                        records.append(
                            (attrs["tool_name"], attrs["call_id"], attrs["arguments"], attrs["output"])
                        )
    assert records
    found = session("shell_read", CODEX, ("logs",))
    assert [(c.name, c.call_id, c.arguments, c.result) for c in found.tool_calls] == records
    assert all(c.error is None for c in found.tool_calls)
    assert found.content_capture == "present"
