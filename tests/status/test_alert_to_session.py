"""From the alert to the reason, in a real headless Chromium against a real ``skillgauge
serve`` fed with every recorded session: the ``sessions`` link of
``SkillgaugeSkippedSkillRateHigh`` (deploy/prometheus/rules.yml) opens the misses, the first
miss's page shows what the user asked and the rule that made the skill expected, and the
overview's skipped-skill figure opens the same list.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import yaml
from browser import chromium
from fake_anthropic import FakeAnthropic
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from support import Server, metric_value, wait_for

sys.path.insert(0, str(Path(__file__).parent.parent / "deploy"))
from promserver import fixture_requests, send_grpc

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
SKILLS = ROOT / "tests" / "fixtures" / "skills"
RULE = "(?i)release notes"
RED = "rgba(176, 0, 32, 1)"  # .fail in base.html
GREEN = "rgba(11, 107, 47, 1)"  # .pass


def _total(text: str, name: str) -> float:
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(name + "{"))


def _all_evaluated(srv: Server) -> bool:
    text = srv.metrics()
    closed = _total(text, "skillgauge_sessions_closed_total")
    return (
        metric_value(text, "skillgauge_sessions_open") == 0
        and closed > 0
        and _total(text, "skillgauge_sessions_evaluated_total") == closed
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("alert")
    judge = FakeAnthropic().start()
    extra = {
        "judge": {"base_url": judge.base_url, "api_key": "test-key"},
        "skills": {"paths": [str(SKILLS)]},
        "expectations": [{"when": {"user_message": RULE}, "expect": ["release-notes"]}],
    }
    srv = Server(tmp, extra)  # no auth: this browser is on loopback
    try:
        traces, logs = fixture_requests()
        send_grpc(srv.grpc_port, traces, logs)
        srv.get_json("/v1/sessions/-")  # answers once every acknowledged request is assembled
        wait_for(lambda: _all_evaluated(srv), timeout=90)
        yield srv
    finally:
        srv.stop()
        judge.stop()


@pytest.fixture(scope="module")
def browser(served: Server) -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def _alert_link(base: str) -> str:
    rules = yaml.safe_load(RULES.read_text())
    (alert,) = [
        r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "SkillgaugeSkippedSkillRateHigh"
    ]
    template = alert["annotations"]["sessions"]
    # The base URL is the one template in it (Prometheus' external label skillgauge_url).
    (placeholder,) = re.findall(r"\{\{.*?\}\}", template)
    assert "$externalLabels.skillgauge_url" in placeholder
    return template.replace(placeholder, base)


def _misses(srv: Server) -> list[dict[str, Any]]:
    code, body = srv.get_json("/v1/sessions?" + urlencode({"evaluation": "skill_invoked", "passed": "false", "limit": 500}))
    assert code == 200, body
    return list(body["sessions"])


def _listed(driver: WebDriver) -> list[str]:
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "tr.session-row a.session-link")]


def test_from_the_alert_to_the_request_and_the_rule(served: Server, browser: WebDriver) -> None:
    link = _alert_link(served.status_url)
    assert dict(parse_qsl(urlsplit(link).query)) == {"evaluation": "skill_invoked", "passed": "false", "since": "2h"}
    browser.get(link)
    misses = _misses(served)
    assert misses, "the recordings hold sessions that missed release-notes"
    assert _listed(browser) == [r["session_id"] for r in misses][:50]  # a page holds 50
    # The filters are said in words, the time as a readable UTC time.
    said = browser.find_element(By.ID, "filters").text
    assert re.search(r"closed at or after \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(2h 0m ago\)", said), said
    assert "with an evaluation row: evaluation skill_invoked, failed (passed=false)" in said
    # Every row listed failed, and shows it in the failing colour.
    for row in browser.find_elements(By.CSS_SELECTOR, "tr.session-row"):
        assert "failing" in (row.get_attribute("class") or "")
        invoked = [
            span
            for span in row.find_elements(By.CSS_SELECTOR, ".evaluations span")
            if span.text.startswith("skill_invoked")
        ]
        assert invoked and all(s.value_of_css_property("color") == RED for s in invoked)

    first = browser.find_element(By.CSS_SELECTOR, "tr.session-row a.session-link")
    session_id = first.text
    first.click()
    wait_for(lambda: browser.find_elements(By.ID, "session-id"), timeout=10)
    assert browser.find_element(By.ID, "session-id").text == session_id
    page = browser.find_element(By.CSS_SELECTOR, "section.revision")
    # The user's request, as the coverage line records it, and it is what the rule matched.
    _, detail = served.get_json(misses[0]["detail"])
    coverage = detail["revisions"][-1]["records"][-1]["coverage"]
    requests = [li.text for li in page.find_elements(By.CSS_SELECTOR, "ol.requests li")]
    assert requests and all(t["request"] in shown for t, shown in zip(coverage["turns"], requests, strict=True))
    assert any(re.search(RULE, t["request"]) for t in coverage["turns"])
    # Why release-notes was expected: the rule, and the words of the request it matched.
    (expected,) = [
        row for row in page.find_elements(By.CSS_SELECTOR, "table.expected tr")[1:] if "release-notes" in row.text
    ]
    why = expected.find_element(By.CSS_SELECTOR, ".why").text
    assert f"config rule user_message /{RULE}/ matched" in why and "in the request of turn" in why
    matched = re.search(r"matched '(.*)' in the request of turn (\d+)", why)
    assert matched is not None and re.search(RULE, matched.group(1))
    assert expected.find_element(By.CSS_SELECTOR, "td.fail").text == "missed"
    # The skill_invoked row: failing, in its colour, with what was looked at.
    (invoked,) = [
        r
        for r in page.find_elements(By.CSS_SELECTOR, "tr.result")
        if r.get_attribute("data-evaluation") == "skill_invoked" and "release-notes" in r.text
    ]
    assert "failing" in (invoked.get_attribute("class") or "")
    assert invoked.find_element(By.CSS_SELECTOR, ".fail").value_of_css_property("color") == RED
    evidence = invoked.find_element(By.CSS_SELECTOR, ".evidence").text
    loads = len(coverage["skill_loads"])
    assert f"looked at the {loads} skill load" in evidence
    assert "signals: every detector ran on every span and log record" in evidence


def test_the_overview_skipped_skill_figure_opens_the_same_list(served: Server, browser: WebDriver) -> None:
    browser.get(f"{served.status_url}/ui/")
    figure = browser.find_element(By.CSS_SELECTOR, "#window-hour .card-skipped b a")
    figure.click()
    wait_for(lambda: "evaluation=skill_invoked" in browser.current_url, timeout=10)
    params = dict(parse_qsl(urlsplit(browser.current_url).query))
    assert (params["evaluation"], params["passed"]) == ("skill_invoked", "false")
    from_overview = _listed(browser)
    browser.get(_alert_link(served.status_url))
    assert from_overview == _listed(browser) == [r["session_id"] for r in _misses(served)][:50]
    assert from_overview


def test_passing_rows_are_green_failing_rows_red_and_unjudged_ones_neither(
    served: Server, browser: WebDriver
) -> None:
    browser.get(f"{served.status_url}/ui/sessions?limit=500")
    for row in browser.find_elements(By.CSS_SELECTOR, "tr.session-row"):
        verdicts = row.find_elements(By.CSS_SELECTOR, ".evaluations span.pass, .evaluations span.fail")
        kind = (row.get_attribute("class") or "").split()[-1]
        if not verdicts and "missed" not in row.text:
            assert kind == "unjudged", row.text  # nothing judged is never shown as a pass
        elif row.find_elements(By.CSS_SELECTOR, ".evaluations span.fail") or "missed" in row.text:
            assert kind == "failing", row.text
        else:
            assert kind == "passing", row.text
    browser.get(f"{served.status_url}/ui/sessions?evaluation=skill_invoked&passed=true")
    passed = browser.find_elements(By.CSS_SELECTOR, "tr.session-row .evaluations span.pass")
    assert passed and all(s.value_of_css_property("color") == GREEN for s in passed)
    browser.get(f"{served.status_url}/ui/sessions?evaluation=skill_invoked&passed=false")
    failed = browser.find_elements(By.CSS_SELECTOR, "tr.session-row .evaluations span.fail")
    assert failed and all(s.value_of_css_property("color") == RED for s in failed)


def test_a_catalog_not_recorded_says_so_and_names_the_registry_used(served: Server, browser: WebDriver) -> None:
    code, body = served.get_json("/v1/sessions?limit=500")
    assert code == 200
    chosen = None
    for row in body["sessions"]:
        if row["catalog"]["state"] != "not_recorded":
            continue
        records = served.get_json(row["detail"])[1]["revisions"][-1]["records"]
        if any(r.get("catalog_source") == "registry" for r in records):
            chosen = row["session_id"]
            break
    assert chosen is not None, "a recording whose catalog is not recorded, judged against the registry's"
    browser.get(f"{served.status_url}/ui/sessions/{chosen}")
    page = browser.find_element(By.CSS_SELECTOR, "section.revision")
    assert page.find_element(By.CSS_SELECTOR, "h3:nth-of-type(3)").text.startswith("Catalog: not_recorded") or (
        "Catalog: not_recorded" in page.text
    )
    words = page.find_element(By.ID, "catalog-words").text
    assert words.startswith("not_recorded: no span or log record of this session showed which skills")
    assert "Rows marked catalog: registry used the skills of skills.paths instead." in words
    assert "No skill was advertised to the model" not in page.text
