"""The dashboard's skill and evaluation panels link to the status port's /ui/sessions page,
filtered by the labels of the bar or row clicked, over the dashboard's time range."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from collector.status import query as session_query

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "dashboards" / "skillgauge.json"
# A link's label references: ${__field.labels.X:percentencode} (a series) or
# ${__data.fields.X:percentencode} (a table row).
_REFERENCE = re.compile(r"\$\{__(?:field\.labels|data\.fields)\.(\w+):percentencode\}")
_GROUPED = re.compile(r"sum by \(([^)]*)\)")
# What Grafana puts in for the time range and for each label, as a click would.
_SAMPLE = {
    "${__from:date:iso}": "2026-01-01T00:00:00.000Z",
    "${__to:date:iso}": "2026-01-01T01:00:00.000Z",
    "${status_url}": "http://localhost:9464",
}


def _panels() -> list[dict]:  # type: ignore[type-arg]
    return list(json.loads(DASHBOARD.read_text())["panels"])


def _grouped_by(panel: dict) -> set[str]:  # type: ignore[type-arg]
    found = _GROUPED.search(panel["targets"][0]["expr"])
    return {label.strip() for label in found.group(1).split(",")} if found else set()


def test_status_url_is_a_dashboard_variable() -> None:
    variables = {v["name"]: v for v in json.loads(DASHBOARD.read_text())["templating"]["list"]}
    assert variables["status_url"]["type"] == "textbox"
    assert variables["status_url"]["query"].startswith("http")


def test_every_skill_and_evaluation_panel_links_to_the_filtered_sessions_page() -> None:
    linked = 0
    for panel in _panels():
        if panel["type"] == "row":
            continue
        by = _grouped_by(panel) & {"skill", "evaluation"}
        links = panel["fieldConfig"]["defaults"].get("links", [])
        if not by or panel["id"] == 20:  # 20: score buckets by evaluation, not sessions
            continue
        assert links, f"panel {panel['id']} {panel['title']!r} groups by {by} but links nowhere"
        for link in links:
            url = link["url"]
            assert url.startswith("${status_url}/ui/sessions?"), url
            # Every label the panel groups by and the page can filter on is passed through.
            referenced = set(_REFERENCE.findall(url))
            assert referenced <= _grouped_by(panel), (panel["title"], referenced)
            assert by <= referenced, (panel["title"], url)
            for placeholder, value in _SAMPLE.items():
                url = url.replace(placeholder, value)
            # a value each label could take (status is checked against the result statuses)
            url = _REFERENCE.sub(lambda m: "skipped" if m.group(1) == "status" else "release-notes", url)
            params = dict(parse_qsl(urlsplit(url).query))
            query = session_query.parse(params)  # the page's own parser accepts what Grafana sends
            assert (query.since, query.until) == (1767225600.0, 1767229200.0)
            linked += 1
    assert linked >= 8


def _sample(url: str) -> dict[str, str]:
    for placeholder, value in _SAMPLE.items():
        url = url.replace(placeholder, value)
    return dict(parse_qsl(urlsplit(url).query))


def test_the_rate_and_count_panels_link_to_the_sessions_behind_them() -> None:
    # title -> the filters its link must carry (besides the time range), by name
    expected = {
        "Sessions evaluated": {},
        "Skipped-skill rate": {"evaluation": "skill_invoked", "passed": "false"},
        "Omission rate": {"evaluation": "skill_omission", "passed": "false"},
    }
    panels = {p["title"]: p for p in _panels()}
    for title, filters in expected.items():
        (link,) = panels[title]["fieldConfig"]["defaults"]["links"]
        params = _sample(link["url"])
        assert {k: v for k, v in params.items() if k not in ("since", "until")} == filters, title
        query = session_query.parse(params)
        assert (query.since, query.until) == (1767225600.0, 1767229200.0), title
    (open_link,) = panels["Open sessions"]["fieldConfig"]["defaults"]["links"]
    assert session_query.parse(_sample(open_link["url"])).state == "open"
