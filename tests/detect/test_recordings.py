"""Every recording of a real framework, against the ground truth its recorder wrote down.

For each scenario in ``tests/fixtures/frameworks/<framework>/expected.json``: the skill loads
(skill, status, signal, body present), the catalog state, the framework and whether tool
content was captured must all match what detection made of the recorded spans and logs.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support import FRAMEWORKS, detectable

from collector.config import parse
from collector.replay import replay
from evaluators.evidence import Session


def scenarios() -> list[Any]:
    cases = []
    for expected_file in sorted(FRAMEWORKS.glob("*/expected.json")):
        spec = json.loads(expected_file.read_text())
        for name, scenario in spec["scenarios"].items():
            cases.append(pytest.param(expected_file.parent, spec["framework"], scenario, id=f"{expected_file.parent.name}/{name}"))
    return cases


def detect(folder: Path, files: list[str]) -> list[Session]:
    outcome = asyncio.run(replay([str(folder / f) for f in files], parse({})))
    assert not outcome.problems
    return [c.session for c in outcome.coverages]


def load_rows(loads: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    return sorted((x["skill"].lower(), x["status"], x["signal"], bool(x["has_body"])) for x in loads)


@pytest.mark.parametrize(("folder", "framework", "scenario"), scenarios())
def test_recording_matches_ground_truth(folder: Path, framework: str, scenario: dict[str, Any]) -> None:
    if "known_gap" in scenario:  # a gap is named only while detection really falls short of the truth
        held = detectable(scenario)
        assert (load_rows(held["loads"]), held["catalog"]) != (load_rows(scenario["loads"]), scenario["catalog"])
        assert scenario["known_gap"]["why"]
        scenario = held
    sessions = detect(folder, scenario["files"])
    (session,) = [s for s in sessions if s.session_id == scenario["session_id"]]
    got = load_rows([
        {"skill": x.skill, "status": x.status, "signal": x.signal, "has_body": x.has_body} for x in session.skill_loads
    ])
    assert got == load_rows(scenario["loads"])
    assert session.catalog.state == scenario["catalog"]["state"]
    if scenario["catalog"]["state"] == "advertised":
        advertised = {e.name.lower() for e in session.catalog.skills.values()}
        assert {s.lower() for s in scenario["catalog"]["skills"]} <= advertised
    assert session.framework == framework
    assert session.content_capture in (scenario["content_capture"], "no_tools" if scenario["content_capture"] == "present" else "")
