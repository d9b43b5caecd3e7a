"""The /ui/ pages in a real headless Chromium, against a real ``skillgauge serve`` fed with
recorded sessions and judged by the fake Anthropic API: what a person sees.

``SKILLGAUGE_SCREENSHOTS=docs/screenshots`` also saves one PNG of each page there (the
README shows them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from browser import chromium, screenshot
from fake_anthropic import FakeAnthropic, Seen, default_verdict, verdict
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from support import Server, metric_value, wait_for

sys.path.insert(0, str(Path(__file__).parent.parent / "deploy"))
from promserver import fixture_requests, renamed, send_grpc

TOKEN = "ui-token-5f1e2d3c4b5a69788"
TRACE_URL = "https://tracing.example/explore?trace={trace_id}&from=skillgauge"
# Carried by a span (its session id) and by a judge explanation: shown as text, never run.
HOSTILE = "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>"
HOSTILE_SESSION = "strands-right_skill-0001" + HOSTILE
SHOTS = os.environ.get("SKILLGAUGE_SCREENSHOTS")


def _hostile_judge(seen: Seen) -> Any:
    if seen.kind == "skill_selection_accuracy":
        return verdict({"reasoning": f"The request quoted {HOSTILE} and the skill fits.", "rating": "Yes"})
    return default_verdict(seen)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("pages")
    (tmp / "status-token").write_text(TOKEN + "\n")
    judge = FakeAnthropic().start()
    extra = {
        "judge": {"base_url": judge.base_url, "api_key": "test-key"},
        "evaluators": {"skill_omission": {"sampling": 100}},
        "expectations": [{"when": {"user_message": "release notes"}, "expect": ["release-notes"]}],
        "status": {"auth": {"bearer_token_file": str(tmp / "status-token")}, "trace_url": TRACE_URL},
    }
    srv = Server(tmp, extra, status_token=TOKEN)
    try:
        traces, logs = fixture_requests()
        hostile = [renamed(r, HOSTILE) for r in traces if _is_session(r, "strands-right_skill-0001")]
        send_grpc(srv.grpc_port, traces, logs)
        wait_for(lambda: _all_evaluated(srv), timeout=60)
        # Every recorded session is evaluated: the next judge answers quote the hostile string.
        judge.script = _hostile_judge
        send_grpc(srv.grpc_port, hostile)
        wait_for(lambda: srv.get_json(f"/v1/sessions/{_quoted(HOSTILE_SESSION)}")[0] == 200, timeout=30)
        yield srv
    finally:
        srv.stop()
        judge.stop()


def _total(text: str, name: str) -> float:
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines() if line.startswith(name + "{"))


def _all_evaluated(srv: Server) -> bool:
    text = srv.metrics()
    closed = _total(text, "skillgauge_sessions_closed_total")
    return (
        metric_value(text, "skillgauge_sessions_open") == 0
        and closed > 0
        and (_total(text, "skillgauge_sessions_evaluated_total") == closed)
    )


def _is_session(request: Any, session_id: str) -> bool:
    return session_id.encode() in request.SerializeToString()


def _quoted(session_id: str) -> str:
    from urllib.parse import quote

    return quote(session_id, safe="")


@pytest.fixture(scope="module")
def browser(served: Server) -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def _login(driver: WebDriver, srv: Server) -> None:
    driver.get(f"{srv.status_url}/ui/login")
    driver.find_element(By.NAME, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait_for(lambda: urlsplit(driver.current_url).path == "/ui/", timeout=10)


def _shot(driver: WebDriver, name: str) -> None:
    if SHOTS:
        screenshot(driver, Path(SHOTS) / f"{name}.png")


def _no_script_ran(driver: WebDriver) -> None:
    assert driver.title != "owned"
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        alert = None
    assert alert is None
    assert driver.find_elements(By.CSS_SELECTOR, "img[src=x], main script") == []


def test_pages_need_the_token_and_the_login_form_sets_it(served: Server) -> None:
    with chromium() as driver:
        driver.get(f"{served.status_url}/ui/sessions")
        assert driver.find_element(By.TAG_NAME, "h1").text == "Sign in"
        assert "strands-" not in driver.page_source
        driver.find_element(By.NAME, "token").send_keys("not-the-token")
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        wait_for(lambda: driver.find_elements(By.ID, "login-failed"), timeout=10)
        _login(driver, served)
        driver.get(f"{served.status_url}/ui/sessions/strands-right_skill-0001")
        assert driver.find_element(By.ID, "session-id").text == "strands-right_skill-0001"
    text = served.metrics()
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="ui") >= 2


def test_session_page_shows_catalog_loads_evaluations_and_trace_link(
    served: Server, browser: WebDriver
) -> None:
    _login(browser, served)
    _, detail = served.get_json("/v1/sessions/strands-right_skill-0001")
    coverage = detail["revisions"][-1]["records"][-1]["coverage"]
    browser.get(f"{served.status_url}/ui/sessions/strands-right_skill-0001")
    page = browser.find_element(By.CSS_SELECTOR, "section.revision")
    catalog = [li.text for li in page.find_elements(By.CSS_SELECTOR, "ul.catalog li")]
    assert catalog == coverage["catalog"]["skills"] and "release-notes" in catalog
    loads = page.find_elements(By.CSS_SELECTOR, "table.loads tr")[1:]
    assert [row.find_elements(By.TAG_NAME, "td")[1].text for row in loads] == ["release-notes"]
    assert loads[0].find_elements(By.TAG_NAME, "td")[2].text == "loaded"
    results = page.find_elements(By.CSS_SELECTOR, "tr.result")
    shown = {r.get_attribute("data-evaluation") for r in results}
    assert {"skill_selection_accuracy", "skill_instruction_following", "skill_omission"} <= shown
    selection = next(r for r in results if r.get_attribute("data-evaluation") == "skill_selection_accuracy")
    assert "judged / " in selection.text
    assert selection.find_element(By.CSS_SELECTOR, ".explanation").text == "The skill matches the request."
    assert "load #1 of release-notes (loaded," in selection.find_element(By.CSS_SELECTOR, ".evidence").text
    usage = selection.find_element(By.CSS_SELECTOR, ".usage").text
    record = next(
        r for r in detail["revisions"][-1]["records"] if r.get("evaluation") == "skill_selection_accuracy"
    )
    assert f"{record['judge']['input_tokens']} in / {record['judge']['output_tokens']} out" in usage
    assert "USD" in usage
    link = page.find_element(By.CSS_SELECTOR, ".session-trace a.trace-link")
    href = link.get_attribute("href")
    assert href == TRACE_URL.replace("{trace_id}", coverage["trace_id"])
    assert parse_qs(urlsplit(href).query)["trace"] == [coverage["trace_id"]]
    _shot(browser, "session")


def test_hostile_strings_from_spans_are_shown_not_run(served: Server, browser: WebDriver) -> None:
    _login(browser, served)
    browser.get(f"{served.status_url}/ui/sessions/{_quoted(HOSTILE_SESSION)}")
    assert browser.find_element(By.ID, "session-id").text == HOSTILE_SESSION
    explanations = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".explanation")]
    assert f"The request quoted {HOSTILE} and the skill fits." in explanations
    _no_script_ran(browser)
