"""The /ui/ pages in a real headless Chromium, against a real ``skillgauge serve`` fed with
recorded sessions and judged by the fake Anthropic API: what a person sees.

``SKILLGAUGE_SCREENSHOTS=deploy/screenshots`` also saves one PNG of each page there (the
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
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.wait import WebDriverWait
from support import Server, metric_value, outside_address, wait_for

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
        # Claude Code's log records after its traces were evaluated: those sessions reopen
        # as revision 2.
        for wave in (traces, logs):
            send_grpc(srv.grpc_port, [r for r in wave if r in traces], [r for r in wave if r in logs])
            srv.get_json("/v1/sessions/-")  # answers once every acknowledged request is assembled
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
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="ui", reason="unauthenticated") >= 1
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="ui", reason="login_failed") >= 1


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


def _api_rows(srv: Server, **params: str) -> list[dict[str, Any]]:
    from urllib.parse import urlencode

    code, body = srv.get_json(f"/v1/sessions?{urlencode({'limit': '500', **params})}")
    assert code == 200, body
    assert body["next_cursor"] is None
    return list(body["sessions"])


def _listed(driver: WebDriver) -> list[str]:
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "tr.session-row a.session-link")]


def test_overview_shows_the_last_hour_and_day(served: Server, browser: WebDriver) -> None:
    _login(browser, served)
    rows = _api_rows(served)
    browser.get(f"{served.status_url}/ui/")
    for window in ("hour", "day"):
        section = browser.find_element(By.ID, f"window-{window}")
        assert section.find_element(By.CSS_SELECTOR, ".card-sessions b").text == str(len(rows))
        loads: dict[str, int] = {}
        for row in rows:
            for status, n in row["loads_by_status"].items():
                loads[status] = loads.get(status, 0) + n
        heads = [th.text for th in section.find_elements(By.CSS_SELECTOR, "table.loads th")]
        counts = [int(td.text) for td in section.find_elements(By.CSS_SELECTOR, "table.loads td")]
        assert dict(zip(heads, counts, strict=True)) == {k: v for k, v in loads.items() if k in heads}
        assert loads["loaded"] > 0 and loads["failed"] > 0
        expecting = [r for r in rows if r["expectations"]["expected"]]
        missed = [r for r in expecting if r["expectations"]["missed"]]
        assert 0 < len(missed) < len(expecting)
        assert (
            section.find_element(By.CSS_SELECTOR, ".card-skipped b").text
            == f"{100 * len(missed) / len(expecting):.1f} %"
        )
        omission = [
            e
            for r in rows
            for e in r["evaluations"]
            if e["evaluation"] == "skill_omission" and e["status"] == "judged"
        ]
        failed = [e for e in omission if e["passed"] is False]
        assert (
            section.find_element(By.CSS_SELECTOR, ".card-omission b").text
            == f"{100 * len(failed) / len(omission):.1f} %"
        )
        spend = sum(  # every revision's judge calls were paid for, superseded ones too
            revision["records"][-1]["coverage"]["judge"]["cost_usd"]
            for r in rows
            for revision in served.get_json(r["detail"])[1]["revisions"]
        )
        assert spend > 0
        assert section.find_element(By.CSS_SELECTOR, ".card-spend b").text == f"{spend:.4f} USD"
    _shot(browser, "overview")
    browser.find_element(By.CSS_SELECTOR, "#window-hour .card-sessions b a").click()
    wait_for(lambda: "since=" in browser.current_url, timeout=10)
    assert _listed(browser) == [r["session_id"] for r in rows][:50]


def test_recent_sessions_newest_first_and_the_filter_form_narrows_them(
    served: Server, browser: WebDriver
) -> None:
    _login(browser, served)
    everything = _api_rows(served)
    browser.get(f"{served.status_url}/ui/sessions?limit=500")
    assert _listed(browser) == [r["session_id"] for r in everything]
    closed = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "tr.session-row td:first-child")]
    assert closed == sorted(closed, reverse=True)

    form = browser.find_element(By.CSS_SELECTOR, "form.filters")
    form.find_element(By.NAME, "evaluation").send_keys("skill_selection_accuracy")
    form.find_element(By.NAME, "skill").send_keys("release-notes")
    form.find_element(By.CSS_SELECTOR, "select[name=status] option[value='']")  # "any" is offered
    form.find_element(By.XPATH, ".//select[@name='status']/option[text()='judged']").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: "skill=release-notes" in browser.current_url, timeout=10)
    narrowed = _listed(browser)
    expected = _api_rows(
        served, evaluation="skill_selection_accuracy", skill="release-notes", status="judged"
    )
    assert narrowed == [r["session_id"] for r in expected]
    assert 0 < len(narrowed) < len(everything)
    for row in browser.find_elements(By.CSS_SELECTOR, "tr.session-row"):
        assert (
            "skill_selection_accuracy [release-notes]: pass"
            in row.find_element(By.CSS_SELECTOR, ".evaluations").text
        )
    # The form shows what it filtered on, so the next change keeps the rest.
    assert browser.find_element(By.NAME, "skill").get_attribute("value") == "release-notes"

    browser.get(f"{served.status_url}/ui/sessions?since=yesterday")
    assert "since: 'yesterday' is not a time" in browser.find_element(By.ID, "query-error").text
    if SHOTS:
        browser.get(f"{served.status_url}/ui/sessions?limit=12")
        _shot(browser, "sessions")


def test_the_older_link_pages_through_every_session_once(served: Server, browser: WebDriver) -> None:
    _login(browser, served)
    everything = [r["session_id"] for r in _api_rows(served)]
    assert len(everything) > 10
    browser.get(f"{served.status_url}/ui/sessions?limit=4")
    seen: list[str] = []
    pages = 0
    while True:
        listed = _listed(browser)
        assert 0 < len(listed) <= 4
        seen += listed
        pages += 1
        older = browser.find_elements(By.ID, "older")
        if not older:
            break
        older[0].click()
        # The next page has loaded (checked every 50 ms: selenium's default, 0.5 s, cost each page).
        WebDriverWait(browser, 10, poll_frequency=0.05).until(staleness_of(older[0]))
        assert "cursor=" in browser.current_url
    assert seen == everything
    assert pages == -(-len(everything) // 4)
    assert browser.find_elements(By.ID, "last-page")


def test_without_auth_or_trace_url_loopback_reads_the_pages_and_no_trace_is_linked(
    tmp_path: Path,
) -> None:
    srv = Server(tmp_path)  # no auth, no status.trace_url; this client is on loopback
    try:
        traces, _ = fixture_requests()
        send_grpc(srv.grpc_port, [r for r in traces if _is_session(r, "strands-right_skill-0001")])
        srv.get_json("/v1/sessions/-")
        wait_for(lambda: _all_evaluated(srv), timeout=30)
        with chromium() as driver:
            driver.get(f"{srv.status_url}/ui/login")  # nothing to log in to: the overview
            assert urlsplit(driver.current_url).path == "/ui/"
            assert driver.find_element(By.CSS_SELECTOR, "#window-hour .card-sessions b").text == "1"
            driver.find_element(By.CSS_SELECTOR, "#window-hour .card-sessions b a").click()
            driver.find_element(By.CSS_SELECTOR, "a.session-link").click()
            assert driver.find_element(By.ID, "session-id").text == "strands-right_skill-0001"
            trace = driver.find_element(By.CSS_SELECTOR, ".session-trace").text
            assert len(trace) == 32 and int(trace, 16)  # shown, not linked
            assert driver.find_elements(By.CSS_SELECTOR, "a.trace-link") == []
    finally:
        srv.stop()


def test_without_auth_a_browser_elsewhere_is_refused_the_pages(tmp_path: Path) -> None:
    outside = outside_address()
    srv = Server(tmp_path, {"status": {"endpoint": "0.0.0.0:0"}})
    try:
        with chromium() as driver:
            for path in ("/ui/", "/ui/sessions", "/ui/sessions/strands-right_skill-0001"):
                driver.get(f"http://{outside}:{srv.status_port}{path}")
                assert driver.find_element(By.TAG_NAME, "h1").text == "Refused"
                assert "status.sessions_open: true" in driver.find_element(By.ID, "refused").text
            driver.get(f"http://127.0.0.1:{srv.status_port}/ui/sessions")
            assert driver.find_element(By.TAG_NAME, "h1").text == "Recent sessions"
        text = srv.metrics()
        assert (
            metric_value(
                text, "skillgauge_status_rejected_requests_total", endpoint="ui", reason="not_loopback"
            )
            == 3
        )
        assert "/v1/sessions loopback clients only, /ui/ too" in srv.log()
    finally:
        srv.stop()


def test_a_reopened_session_shows_each_revision_latest_first(served: Server, browser: WebDriver) -> None:
    _login(browser, served)
    reopened = [r for r in _api_rows(served) if r["revision"] == 2]
    assert reopened
    browser.get(f"{served.status_url}/ui/sessions/{_quoted(reopened[0]['session_id'])}")
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "section.revision h2")]
    assert headings == ["Revision 2 (latest)", "Revision 1 (superseded by a later revision)"]


def test_an_open_session_says_so(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"sessions": {"idle_timeout": "300s"}})
    try:
        traces, _ = fixture_requests()
        send_grpc(srv.grpc_port, [r for r in traces if _is_session(r, "strands-right_skill-0001")])
        with chromium() as driver:
            driver.get(f"{srv.status_url}/ui/sessions/strands-right_skill-0001")
            text = driver.find_element(By.ID, "open").text
            assert "Revision 1, 6 spans so far, 1 skill loads so far." in text
            assert "evaluated when it closes" in text
            assert driver.find_elements(By.CSS_SELECTOR, "section.revision") == []
    finally:
        srv.stop()
