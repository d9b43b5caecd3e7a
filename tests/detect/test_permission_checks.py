"""A harness that records no tool content, on real recordings (Kilo Code CLI): what a tool call
asked for comes from the permission check it logged inside its tool span, its outcome from a
tool span whose status the harness sets as the outcome, the skill a failed call asked for and
the catalog from the error it returned, and the session from its log lines' fields.

Each test takes a recorded run and moves one piece of evidence (drops the tool span, doubles
it, renames it, breaks a log body) to check that detection reports what is left, and never
more.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from support import FRAMEWORKS

from collector.config import parse
from collector.detect.skill_tools import named_in_error
from collector.replay import replay
from evaluators.evidence import Session

KILO = FRAMEWORKS / "kilo_cli"
EXPECTED = json.loads((KILO / "expected.json").read_text())["scenarios"]
Span = dict[str, Any]


def recorded(scenario: str, signal: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (KILO / f"{scenario}.{signal}.jsonl").read_text().splitlines() if line]


def edit_spans(requests: list[dict[str, Any]], edit: Callable[[Span], list[Span]]) -> list[dict[str, Any]]:
    """``requests`` with each span replaced by what ``edit`` returns for it (none: dropped)."""
    out = copy.deepcopy(requests)
    for request in out:
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [kept for span in ss["spans"] for kept in edit(span)]
    return out


def sessions(tmp_path: Path, traces: list[dict[str, Any]], logs: list[dict[str, Any]]) -> list[Session]:
    files = []
    for signal, requests in (("traces", traces), ("logs", logs)):
        path = tmp_path / f"run.{signal}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in requests))
        files.append(str(path))
    outcome = asyncio.run(replay(files, parse({})))
    assert not outcome.problems
    return [coverage.session for coverage in outcome.coverages]


def the_session(tmp_path: Path, scenario: str, traces: list[dict[str, Any]], logs: list[dict[str, Any]]) -> Session:
    (session,) = [s for s in sessions(tmp_path, traces, logs) if s.session_id == EXPECTED[scenario]["session_id"]]
    return session


def is_tool_span(span: Span) -> bool:
    return span["name"] == "Tool.execute"


def loads(session: Session) -> list[tuple[str, str, str]]:
    return [(load.skill, load.status, load.signal) for load in session.skill_loads]


def test_a_tool_span_without_content_takes_what_its_permission_check_asked_for(tmp_path: Path) -> None:
    session = the_session(tmp_path, "right_skill", recorded("right_skill", "traces"), recorded("right_skill", "logs"))
    (call,) = session.tool_calls
    assert (call.name, json.loads(call.arguments or "null"), call.result) == ("skill", {"name": "release-notes"}, None)
    assert loads(session) == [("release-notes", "loaded", "skill_tool")]
    assert session.skill_loads[0].body is None
    # The check names what was asked for; the harness recorded no content.
    assert session.content_capture == "missing"


def test_without_its_logs_the_same_call_names_no_skill(tmp_path: Path) -> None:
    session = the_session(tmp_path, "right_skill", recorded("right_skill", "traces"), [])
    assert [(load.skill, load.status) for load in session.skill_loads] == [("", "unresolved")]


def doubled(span: Span) -> list[Span]:
    """The tool span and a twin over the same time: another call of the same tool."""
    if not is_tool_span(span):
        return [span]
    twin = {
        **span,
        "spanId": "00000000000000aa",
        "attributes": [
            a if a["key"] != "tool.call_id" else {"key": "tool.call_id", "value": {"stringValue": "call_twin"}}
            for a in span["attributes"]
        ],
    }
    return [span, twin]


def test_a_check_completes_the_tool_span_it_was_logged_under(tmp_path: Path) -> None:
    traces = edit_spans(recorded("right_skill", "traces"), doubled)
    session = the_session(tmp_path, "right_skill", traces, recorded("right_skill", "logs"))
    # The check's span (Permission.ask) leads up to the recorded tool span, not to its twin.
    assert sorted((load.skill, load.status, load.span_id == "00000000000000aa") for load in session.skill_loads) == [
        ("", "unresolved", True),
        ("release-notes", "loaded", False),
    ]


def test_overlapping_calls_of_one_tool_leave_a_check_unmatched_without_its_ancestry(tmp_path: Path) -> None:
    # The spans between the check and its tool span not received: only time can place it.
    def cut(span: Span) -> list[Span]:
        return [] if span["name"] in ("Permission.ask", "KiloSessionPrompt.askPermission") else doubled(span)

    traces = edit_spans(recorded("right_skill", "traces"), cut)
    session = the_session(tmp_path, "right_skill", traces, recorded("right_skill", "logs"))
    # Which of the two the check was logged in is unknown: neither is named, neither loaded.
    assert [(load.skill, load.status) for load in session.skill_loads] == [("", "unresolved"), ("", "unresolved")]


def test_a_check_whose_tool_span_was_lost_is_a_call_with_no_outcome(tmp_path: Path) -> None:
    traces = edit_spans(recorded("right_skill", "traces"), lambda s: [] if is_tool_span(s) else [s])
    session = the_session(tmp_path, "right_skill", traces, recorded("right_skill", "logs"))
    assert loads(session) == [("release-notes", "unresolved", "skill_tool")]


def test_a_check_a_rule_denied_refuses_the_call_without_its_tool_span(tmp_path: Path) -> None:
    traces = edit_spans(recorded("denied", "traces"), lambda s: [] if is_tool_span(s) else [s])
    session = the_session(tmp_path, "denied", traces, recorded("denied", "logs"))
    assert loads(session) == [("release-notes", "denied", "skill_tool")]


def test_an_ok_status_is_an_outcome_only_on_the_spans_that_set_it_so(tmp_path: Path) -> None:
    def renamed(span: Span) -> list[Span]:
        return [{**span, "name": "execute_tool skill"} if is_tool_span(span) else span]

    traces = edit_spans(recorded("right_skill", "traces"), renamed)
    session = the_session(tmp_path, "right_skill", traces, recorded("right_skill", "logs"))
    # Named by its check, but an OK status elsewhere proves nothing (Strands marks refusals OK).
    assert loads(session) == [("release-notes", "unresolved", "skill_tool")]


def test_a_read_marked_succeeded_loads_without_a_body(tmp_path: Path) -> None:
    session = the_session(tmp_path, "file_read", recorded("file_read", "traces"), recorded("file_read", "logs"))
    (load,) = session.skill_loads
    assert (load.skill, load.status, load.signal, load.body) == ("csv-cleanup", "loaded", "file_read", None)
    assert load.path is not None and load.path.endswith(".kilo/skills/csv-cleanup/SKILL.md")


def test_a_failed_call_names_its_skill_and_the_catalog_from_its_error(tmp_path: Path) -> None:
    session = the_session(
        tmp_path, "missing_skill", recorded("missing_skill", "traces"), recorded("missing_skill", "logs")
    )
    assert loads(session) == [("relese-notes", "failed", "skill_tool")]
    assert session.catalog.state == "advertised"
    assert sorted(session.catalog.skills) == ["csv-cleanup", "incident-report", "kilo-config", "release-notes"]


def test_a_run_named_only_in_its_log_lines_fields_is_a_session(tmp_path: Path) -> None:
    session = the_session(tmp_path, "no_skill", recorded("no_skill", "traces"), recorded("no_skill", "logs"))
    assert session.skill_loads == [] and session.span_count > 0


def log_lines(requests: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The ``[message, fields]`` values of each log line body in ``requests``."""
    for request in requests:
        for rl in request["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for record in sl["logRecords"]:
                    values = record.get("body", {}).get("arrayValue", {}).get("values", [])
                    if len(values) == 2:
                        yield values


def test_log_lines_whose_fields_are_no_json_name_no_session(tmp_path: Path) -> None:
    logs = recorded("no_skill", "logs")
    broken = 0
    for _message, fields in log_lines(logs):
        if "session.id" in fields.get("stringValue", ""):
            fields["stringValue"] = fields["stringValue"].replace('"session.id":', "session.id:")
            broken += 1
    assert broken
    found = sessions(tmp_path, recorded("no_skill", "traces"), logs)
    assert EXPECTED["no_skill"]["session_id"] not in [s.session_id for s in found]


def test_an_error_names_the_skill_asked_for_only_where_it_says_so() -> None:
    # As harnesses wrote them (Kilo Code CLI, a tool raising, Claude Code, Kilo's deny rule).
    assert named_in_error('Skill "relese-notes" not found. Available skills: csv-cleanup') == "relese-notes"
    assert named_in_error("Unknown skill: relese-notes. Available skills: csv-cleanup") == "relese-notes"
    assert named_in_error("<tool_use_error>Unknown skill: pdf-report</tool_use_error>") == "pdf-report"
    rule = '{"permission":"skill","pattern":"release-notes","action":"deny","source":"project"}'
    assert named_in_error(f"The user has specified a rule ... {rule}") == "release-notes"
    # A rule by wildcard names no one skill; an error about something else names none.
    assert named_in_error('{"permission":"skill","pattern":"release-*","action":"deny"}') == ""
    assert named_in_error("connection reset by peer") == ""


def with_checks(requests: list[dict[str, Any]], edit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """``requests`` with ``edit`` applied to the fields of each logged permission check."""
    out = copy.deepcopy(requests)
    edited = 0
    for message, fields in log_lines(out):
        if message.get("stringValue") == "evaluated":
            checked = json.loads(fields["stringValue"])
            edit(checked)
            fields["stringValue"] = json.dumps(checked)
            edited += 1
    assert edited
    return out


def test_only_a_rule_that_refuses_makes_a_check_a_refusal(tmp_path: Path) -> None:
    # A rule that asks the user (who allowed it: the tool ran, status OK), or a check logged
    # without its rule, leaves the outcome to the tool span.
    def ask(fields: dict[str, Any]) -> None:
        fields["action"]["action"] = "ask"

    def no_rule(fields: dict[str, Any]) -> None:
        del fields["action"]

    for edit in (ask, no_rule):
        logs = with_checks(recorded("right_skill", "logs"), edit)
        session = the_session(tmp_path, "right_skill", recorded("right_skill", "traces"), logs)
        assert loads(session) == [("release-notes", "loaded", "skill_tool")], edit.__name__
