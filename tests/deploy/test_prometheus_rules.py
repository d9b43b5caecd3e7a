"""promtool check rules / test rules on deploy/prometheus, and the rules' own conventions."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from promserver import require
from rules_cases import DEPLOY, RULES, RULES_TEST, render

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "skillgauge.json"


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


def test_the_skipped_omission_and_coverage_alerts_link_to_their_sessions_and_panel() -> None:
    from urllib.parse import parse_qsl, urlsplit

    from rules_cases import DEFAULT_BASES, LINKED, links

    from collector.status import query as session_query

    alerts = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    assert set(LINKED) == {a for a, r in alerts.items() if "sessions" in r["annotations"]}
    panels = {p["id"]: p for p in json.loads(DASHBOARD.read_text())["panels"]}
    for alert in LINKED:
        rendered = links(alert, {"evaluation": "skill_omission"}, DEFAULT_BASES)
        url = urlsplit(rendered["sessions"])
        assert url.path == "/ui/sessions"
        query = session_query.parse(dict(parse_qsl(url.query)), now=1767229200.0)
        assert query.since == 1767229200.0 - 7200 and query.evaluation
        # The failures behind the number: failed rows, or rows that could have been judged and were not.
        assert query.passed is False or query.status == "skipped,error"
        panel = int(dict(parse_qsl(urlsplit(rendered["dashboard"]).query))["viewPanel"])
        # The panel shows the alert's own figure.
        title = panels[panel]["title"].lower()
        assert {"SkillgaugeSkippedSkillRateHigh": "skipped", "SkillgaugeOmissionRateHigh": "omission"}.get(
            alert, "judged"
        ) in title, (alert, title)
