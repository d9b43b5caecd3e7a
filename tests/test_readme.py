"""The README's promises that can drift: its length, the config reference, the Quick start,
and the harness table's links to the setup pages under deploy/agents/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from collector.config import parse
from collector.evaluate.config import Evaluator, Evaluators, Judge

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
AGENTS = ROOT / "deploy" / "agents"


def test_the_readme_is_for_users_and_short() -> None:
    assert len(README.splitlines()) <= 350
    headings = re.findall(r"^## (.+)$", README, re.MULTILINE)
    for part in (
        "Quick start",
        "Send it something",
        "Point your agents at it",
        "Expectations and alerts",
        "Reading a session",
        "Operating",
        "Security",
    ):
        assert part in headings, part
    # Expectations, the heart of skipped-skill alerting, come before the reference material.
    assert headings.index("Expectations and alerts") < headings.index("Operating")


def _harness_rows() -> list[str]:
    section = README.split("## Point your agents at it", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| harness")]


def test_every_harness_row_links_to_an_existing_setup_page_and_every_page_is_linked() -> None:
    rows = _harness_rows()
    assert len(rows) >= 20
    linked = []
    for row in rows:
        targets = re.findall(r"\]\((deploy/agents/[a-z0-9_]+\.md)\)", row)
        assert len(targets) == 1, row
        page = ROOT / targets[0]
        assert page.is_file(), row
        assert page.read_text().startswith("# "), page
        linked.append(page.name)
    assert len(set(linked)) == len(linked)
    pages = {p.name for p in AGENTS.glob("*.md")} - {"README.md"}
    assert set(linked) == pages, pages ^ set(linked)


def test_the_setup_pages_keep_what_the_harnesses_need() -> None:
    # What each harness cannot work without, moved here from the README: a regression
    # guard against losing a setting in a rewrite.
    needs = {
        "claude_code.md": ["CLAUDE_CODE_ENABLE_TELEMETRY=1", "OTEL_LOG_TOOL_DETAILS=1", "OTEL_LOG_USER_PROMPTS=1"],
        "codex_cli.md": ["/v1/logs", "log_user_prompt = true", 'reason="not_found"'],
        "gemini_cli.md": ['"otlpEndpoint": "http://skillgauge:4317"', '"traces": true'],
        "strands.md": ['trace_attributes={"session.id": session_id}'],
        "opencode.md": ['"openTelemetry": true', "OTEL_BSP_SCHEDULE_DELAY=100"],
        "kilo_cli.md": ["OTEL_BSP_SCHEDULE_DELAY=100", "skills.paths"],
        "agent_framework.md": ["BaggageSpanProcessor", "enable_sensitive_data=True"],
        "any.md": ["<available_skills>", "gen_ai.skill.name"],
    }
    for page, parts in needs.items():
        text = (AGENTS / page).read_text()
        for part in parts:
            assert part in text, (page, part)
        for target in re.findall(r"\]\(([a-z0-9_]+\.md)\)", text):
            assert (AGENTS / target).is_file(), (page, target)


def _reference() -> str:
    return README.split("## Configuration reference", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]


def test_the_configuration_reference_is_a_valid_config_with_the_real_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    block = _reference()
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    documented = parse(yaml.safe_load(block.replace("${env:ANTHROPIC_API_KEY}", "").replace("${env:ANTHROPIC_BASE_URL}", "")))
    assert documented == parse({})


def test_the_configuration_reference_spells_out_every_evaluator_and_the_judge_provider() -> None:
    block = yaml.safe_load(_reference())
    documented = block["evaluators"]
    assert set(documented) == set(Evaluators.model_fields)
    for name, field in Evaluators.model_fields.items():
        if name != "custom":
            assert set(documented[name]) == set(Evaluator.model_fields), name
            assert parse({"evaluators": {name: documented[name]}}).evaluators == Evaluators(), name
            assert field.default == Evaluator.model_validate(documented[name])
    assert block["judge"]["provider"] == Judge().provider


def test_the_expectations_example_is_valid_config() -> None:
    section = README.split("## Expectations and alerts", 1)[1].split("\n## ", 1)[0]
    example = yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])
    rules = parse({"expectations": example["expectations"]}).expectations
    assert [r.expect for r in rules] == [("release-notes",), ("incident-report",)]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_second() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2
    assert "skillgauge serve" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text()
    pytest = "python -m pytest -q -n auto --dist loadscope"  # every core, a module to a worker
    assert "pip install -q -e '.[test]'" in ci and f"{pytest} " in ci
    assert "pip install -e '.[test]'" in commands[1] and commands[1].endswith(pytest)


def test_send_it_something_sends_a_bundled_recording_that_exists() -> None:
    section = README.split("## Send it something", 1)[1].split("\n## ", 1)[0]
    recordings = re.findall(r"(tests/fixtures/frameworks/\S+\.jsonl)", section)
    assert recordings and all((ROOT / r).is_file() for r in recordings)
    assert "http://localhost:4318/v1/traces" in section


def test_the_internals_page_keeps_the_reference_material() -> None:
    internals = (ROOT / "collector" / "README.md").read_text()
    for heading in (
        "## How data flows",
        "## Status API",
        "## What the receivers answer",
        "## Durability, limits and bad input",
        "## Evaluators and the judge",
        "## Security",
    ):
        assert heading in internals, heading
