"""Every recording replayed: no tool call is claimed by two detectors (each detector is gated
on what distinguishes its calls, so the order they are tried in decides nothing)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from support import FRAMEWORKS

from collector.config import parse
from collector.detect import detectors
from collector.replay import replay
from evaluators.evidence import ToolCall


@pytest.mark.parametrize(
    "folder", sorted(p.parent for p in FRAMEWORKS.glob("*/expected.json")), ids=lambda p: p.name
)
def test_no_recorded_call_is_claimed_by_two_detectors(folder: Path) -> None:
    outcome = asyncio.run(replay([str(folder)], parse({})))
    calls = [call for coverage in outcome.coverages for call in coverage.session.tool_calls]
    twice = [(call.name, detectors.claims(call)) for call in calls if len(detectors.claims(call)) > 1]
    assert twice == []


def test_a_call_two_ungated_detectors_would_both_claim_is_claimed_once() -> None:
    # A read tool returning a SKILL.md: the read detector's, not also "any tool that returned one".
    body = "---\nname: release-notes\ndescription: Write release notes.\n---\n\n# Release notes\n"
    call = ToolCall(
        name="read_file",
        span_id="01",
        trace_id="02",
        start_unix_nano=1,
        arguments='{"path": "skills/release-notes/SKILL.md"}',
        result=body,
    )
    assert detectors.claims(call) == ["file_reads"]
    assert detectors.claims(replace(call, name="open_document")) == ["any_reads"]
    # Named by its name rather than its path, the same result makes the tool a skill tool.
    by_name = replace(call, name="open_document", arguments='{"which": "release-notes"}')
    assert detectors.claims(by_name) == ["skill_tools"]
