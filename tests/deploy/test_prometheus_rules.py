"""promtool check rules / test rules on deploy/prometheus, and the rules' own conventions."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from promserver import require
from rules_cases import RULES, RULES_TEST, render


@pytest.fixture(autouse=True)
def _needs_promtool() -> None:
    require("promtool")


def _promtool(*args: str) -> str:
    result = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_promtool_check_rules() -> None:
    assert "SUCCESS" in _promtool("check", "rules", RULES.name)


def test_promtool_test_rules() -> None:
    assert RULES_TEST.read_text() == render(), (
        "rules_test.yml is stale: run python tests/deploy/rules_cases.py"
    )
    assert "SUCCESS" in _promtool("test", "rules", RULES_TEST.name)


def test_every_alert_has_a_runbook_a_severity_and_a_unit_test() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    alerts = [r for r in rules if "alert" in r]
    assert len(alerts) >= 8
    tested = {
        t["alertname"]
        for case in yaml.safe_load(RULES_TEST.read_text())["tests"]
        for t in case.get("alert_rule_test", [])
        if t["exp_alerts"]
    }
    for alert in alerts:
        assert alert["annotations"]["runbook"].strip(), alert["alert"]
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["alert"] in tested, f"{alert['alert']} never fires in rules_test.yml"
