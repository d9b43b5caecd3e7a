"""The README's promises that can drift: the config reference and the Quick start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from collector.config import parse
from collector.evaluate.config import Evaluator, Evaluators, Judge

README = (Path(__file__).parents[1] / "README.md").read_text()


def test_the_configuration_reference_is_a_valid_config_with_the_real_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    block = README.split("## Configuration reference", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    documented = parse(yaml.safe_load(block.replace("${env:ANTHROPIC_API_KEY}", "").replace("${env:ANTHROPIC_BASE_URL}", "")))
    assert documented == parse({})


def test_the_configuration_reference_spells_out_every_evaluator_and_the_judge_provider() -> None:
    block = yaml.safe_load(
        README.split("## Configuration reference", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    )
    documented = block["evaluators"]
    assert set(documented) == set(Evaluators.model_fields)
    for name, field in Evaluators.model_fields.items():
        if name != "custom":
            assert set(documented[name]) == set(Evaluator.model_fields), name
            assert parse({"evaluators": {name: documented[name]}}).evaluators == Evaluators(), name
            assert field.default == Evaluator.model_validate(documented[name])
    assert block["judge"]["provider"] == Judge().provider


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_second() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2
    assert "skillgauge serve" in commands[0]
    ci = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]'" in ci and "python -m pytest -q" in ci
    assert "pip install -e '.[test]'" in commands[1] and "python -m pytest -q" in commands[1]
