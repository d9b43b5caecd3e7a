"""The user's request: the words the user typed, with what the harness injected removed.

Against every recording under tests/fixtures/frameworks: the requests the coverage line
reports equal the prompts the recorder typed (``prompts`` in expected.json, taken from its
recorder); where the harness records no prompt (``user_requests: null``) the coverage line
says so, and the typed prompt is indeed nowhere in the recording.  An expectation rule keyed
on a skill's name fires only where the user typed that name: never on a name that sits in a
catalog, a folder tree or an injected body alone.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, FRAMEWORKS

from collector.config import parse
from collector.detect import intake as intake_module
from collector.detect import session as session_module
from collector.detect.user_request import user_request
from collector.replay import replay

SKILL_NAMES = sorted(p.name for p in (FIXTURES / "skills").iterdir() if (p / "SKILL.md").is_file())
# The resource attribute that holds a process's argv: a CLI run with its prompt as an
# argument has it there, which is the command line, not a recorded request.
ARGV = "process.command_args"


def scenarios() -> list[Any]:
    cases = []
    for expected_file in sorted(FRAMEWORKS.glob("*/expected.json")):
        for name, scenario in json.loads(expected_file.read_text())["scenarios"].items():
            cases.append(pytest.param(expected_file.parent, scenario, id=f"{expected_file.parent.name}/{name}"))
    return cases


def names_around(scenario: dict[str, Any]) -> set[str]:
    """Every skill name the scenario's harness could have put in front of the model."""
    return (
        set(SKILL_NAMES)
        | set(scenario["catalog"].get("skills", []))
        | {load["skill"] for load in scenario["loads"] if load["skill"]}
    )


def rules_on_names(names: set[str]) -> dict[str, Any]:
    """One rule per skill name: its name in a user message makes the skill expected."""
    return {"expectations": [{"when": {"user_message": re.escape(n)}, "expect": n} for n in sorted(names)]}


def coverage_of(folder: Path, scenario: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    outcome = asyncio.run(replay([str(folder / f) for f in scenario["files"]], parse(config)))
    assert outcome.problems == []
    (coverage,) = [c for c in outcome.coverages if c.session.session_id == scenario["session_id"]]
    found: dict[str, Any] = coverage.to_dict()
    return found


def recorded_text(folder: Path, files: list[str]) -> str:
    """The recording's OTLP JSON as text, without each resource's argv."""
    parts = []
    for name in files:
        assert name.endswith(".jsonl"), name
        for line in (folder / name).read_text().splitlines():
            request = json.loads(line)
            for resource in request.get("resourceSpans", []) + request.get("resourceLogs", []):
                attributes = resource.get("resource", {}).get("attributes", [])
                attributes[:] = [a for a in attributes if a.get("key") != ARGV]
            parts.append(json.dumps(request, ensure_ascii=False))
    return "\n".join(parts)


def spellings(text: str) -> set[str]:
    """``text`` as it reads inside JSON strings nested zero to three deep."""
    found = {text}
    for _ in range(3):
        text = json.dumps(text, ensure_ascii=False)[1:-1]
        found.add(text)
    return found


@pytest.mark.parametrize(("folder", "scenario"), scenarios())
def test_the_coverage_line_reports_what_the_user_typed(folder: Path, scenario: dict[str, Any]) -> None:
    typed = scenario["prompts"]
    assert typed and all(isinstance(p, str) and p for p in typed)
    names = names_around(scenario)
    coverage = coverage_of(folder, scenario, rules_on_names(names))
    if scenario["user_requests"] is None:
        assert coverage["user_requests"] == []
        assert coverage["user_request_source"] == "not_recorded"
        assert coverage["turn_count"] == 0
        raw = recorded_text(folder, scenario["files"])
        for prompt in typed:  # the harness truly kept no copy of it
            assert not any(s in raw for s in spellings(prompt)), prompt
    else:
        assert scenario["user_requests"] == typed  # the ground truth is what was typed
        assert coverage["user_requests"] == typed
        assert coverage["turn_count"] == len(typed)
        assert coverage["user_request_source"] in ("span", "log_prompt", "log_message")
    # A rule keyed on a skill's name fires exactly where the user typed that name.
    typed_names = {n for n in names if any(n in p for p in typed)}
    expected = set(coverage["expectations"]["expected"])
    assert expected == (typed_names if scenario["user_requests"] is not None else set())


def test_every_recording_has_its_typed_prompts() -> None:
    total = recorded = 0
    for expected_file in FRAMEWORKS.glob("*/expected.json"):
        for scenario in json.loads(expected_file.read_text())["scenarios"].values():
            total += 1
            assert "prompts" in scenario and "user_requests" in scenario, expected_file
            if scenario["user_requests"] is None:
                assert scenario.get("user_requests_note"), "say why the prompt is not recorded"
            else:
                recorded += 1
    assert total >= 250 and recorded >= 190


@pytest.mark.parametrize(
    ("framework", "name", "skill"),
    [
        ("gemini_cli", "right_skill_traces", "csv-cleanup"),  # .gemini/skills/<name>/ folder tree
        ("gemini_cli", "file_read_traces", "incident-report"),
        ("deepagents", "pinned", "release-notes"),  # a <skill name=..> body; typed "/release-notes"
        ("adk", "right_skill_legacy", "release-notes"),  # no name typed; an <elided> part
    ],
)
def test_the_rule_could_fail_where_a_name_sits_only_in_injected_context(
    framework: str, name: str, skill: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read whole, these sessions' user messages hold a skill name the user never typed (or
    a turn the user never made): without the removal the rule fires, or a turn is made up."""
    folder = FRAMEWORKS / framework
    scenario = json.loads((folder / "expected.json").read_text())["scenarios"][name]
    rules = rules_on_names(names_around(scenario))
    typed = any(skill in prompt for prompt in scenario["prompts"])
    stripped = coverage_of(folder, scenario, rules)
    assert (skill in stripped["expectations"]["expected"]) == typed
    assert stripped["turn_count"] == len(scenario["prompts"])
    monkeypatch.setattr(session_module, "user_request", lambda text: text.strip())
    monkeypatch.setattr(intake_module, "user_request", lambda text: text.strip())
    whole = coverage_of(folder, scenario, rules)
    assert (skill in whole["expectations"]["expected"] and not typed) or whole["turn_count"] > len(scenario["prompts"])


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # Gemini CLI (traces on): its session context with the workspace tree, then the prompt.
        (
            "<session_context>\nThis is the Gemini CLI.\n- **Directory Structure:**\n\n/tmp/p/\n"
            "└───.gemini/\n    └───skills/\n        └───release-notes/\n</session_context>\n"
            "Tidy up data.csv.",
            "Tidy up data.csv.",
        ),
        ("<elided>", ""),  # ADK's placeholder for a part it left out
        ('<skill name="release-notes" path="/skills/release-notes/SKILL.md">\n# Notes\n1. Group\n</skill>', ""),
        (
            "<system-reminder>\nBe brief.\n</system-reminder>\n<environment_context>\n  <cwd>/x</cwd>\n"
            "</environment_context>\nWhy does the build fail?",
            "Why does the build fail?",
        ),
        ("Generate a title for this conversation:\n", ""),  # OpenCode's title request
        ('"What is 2 + 2?"', "What is 2 + 2?"),  # OpenCode run's quoting
        ("Base directory for this skill: /s/release-notes\n\n# Notes", ""),
        # Prose and markup the user wrote stay.
        ("Fix this: <b>bold</b> is not rendering", "Fix this: <b>bold</b> is not rendering"),
        ("<div>\nhello\n</div>\nwhy is this broken?", "<div>\nhello\n</div>\nwhy is this broken?"),
        ("Compare a -- b and c --- d.", "Compare a -- b and c --- d."),
        ("<T> is a type parameter here.", "<T> is a type parameter here."),
        ("<context>\nunclosed: only the tag's own line goes\nok", "unclosed: only the tag's own line goes\nok"),
        ("<ctx>\none\n</ctx>\nmine\n<ctx>\ntwo\n</ctx>", "mine"),  # each block to its own closing tag
        ("# Skill ideas\nPlease think of some.", "# Skill ideas\nPlease think of some."),
        # Trees, catalogs and SKILL.md bodies pasted around the request go.
        ("Explain this layout:\n/proj/\n├── a\n│   └── b\n└── c", "Explain this layout:"),
        ("## Available skills\n- release-notes: notes\n- csv-cleanup: tidy\n\nTidy data.csv", "Tidy data.csv"),
        ("Use this.\n---\nname: x-skill\ndescription: does x\n---\n# X\n1. Do x.", "Use this."),
        (
            "@.gemini/skills/release-notes/SKILL.md Write notes.\n--- Content from referenced files ---\n"
            "Content from @.gemini/skills/release-notes/SKILL.md:\n---\nname: release-notes\n"
            "description: d\n---\nbody\n--- End of content ---",
            "@.gemini/skills/release-notes/SKILL.md Write notes.",
        ),
    ],
)
def test_injected_blocks_are_removed_and_prose_is_kept(text: str, words: str) -> None:
    assert user_request(text) == words
