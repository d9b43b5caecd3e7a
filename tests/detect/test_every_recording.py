"""Every recording under tests/fixtures/frameworks, present and future: no reported skill
name breaks the name rule, and no run is split (each scenario's files make exactly the
sessions expected.json names for those files: one, or several recorded together)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support import FRAMEWORKS

from collector.config import parse
from collector.detect import names
from collector.replay import replay


def scenarios() -> list[Any]:
    cases = []
    for expected_file in sorted(FRAMEWORKS.glob("*/expected.json")):
        for name, scenario in json.loads(expected_file.read_text())["scenarios"].items():
            cases.append(
                pytest.param(expected_file.parent, scenario, id=f"{expected_file.parent.name}/{name}")
            )
    return cases


def test_every_framework_folder_has_ground_truth() -> None:
    folders = {p.parent for p in FRAMEWORKS.glob("*/*.jsonl")} | {
        p.parent for p in FRAMEWORKS.glob("*/*.binpb")
    }
    assert folders and all((folder / "expected.json").is_file() for folder in folders)


@pytest.mark.parametrize(("folder", "scenario"), scenarios())
def test_a_scenario_is_one_session_and_reports_only_skill_names(
    folder: Path, scenario: dict[str, Any]
) -> None:
    outcome = asyncio.run(replay([str(folder / f) for f in scenario["files"]], parse({})))
    assert outcome.problems == []
    sessions = [c.session for c in outcome.coverages]
    together = json.loads((folder / "expected.json").read_text())["scenarios"].values()
    named = {other["session_id"] for other in together if other["files"] == scenario["files"]}
    assert sorted(s.session_id for s in sessions) == sorted(named)
    (session,) = [s for s in sessions if s.session_id == scenario["session_id"]]
    for load in session.skill_loads:
        assert load.skill == "" or names.plausible(load.skill, session.catalog.skills), load
        assert load.skill or load.status != "loaded", load
    for (
        entry
    ) in session.catalog.skills.values():  # by the rule itself: a catalog allows no exception to itself
        assert names.plausible(entry.name), entry


@pytest.mark.parametrize(
    "expected_file", sorted(FRAMEWORKS.glob("*/expected.json")), ids=lambda p: p.parent.name
)
def test_a_framework_folder_replayed_whole_makes_exactly_its_scenarios_sessions(expected_file: Path) -> None:
    spec = json.loads(expected_file.read_text())["scenarios"]
    outcome = asyncio.run(replay([str(expected_file.parent)], parse({})))
    assert outcome.problems == []
    got = sorted(c.session.session_id for c in outcome.coverages)
    assert got == sorted({s["session_id"] for s in spec.values()})
