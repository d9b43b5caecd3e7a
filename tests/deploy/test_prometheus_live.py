"""A real Prometheus scrapes a real ``skillgauge serve`` fed with every recorded session:
every dashboard query, recording rule and alert expression must return data, and
``promtool check metrics`` must accept the exposition."""

from __future__ import annotations

import json
import math
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from export.downstream import Downstream
from fake_anthropic import FakeAnthropic
from promserver import DEPLOY, Prometheus, fixture_requests, renamed, require, send_grpc
from support import Server, metric_value, wait_for


@pytest.fixture(autouse=True, scope="module")
def _needs_prometheus() -> None:
    require("prometheus")


DASHBOARD = DEPLOY / "grafana" / "dashboards" / "skillgauge.json"
RULES = DEPLOY / "prometheus" / "rules.yml"
GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "10m", "$__interval": "15s"}
EXPECT = [
    {"when": {"user_message": "release notes"}, "expect": ["release-notes"]},
    {"when": {"user_message": "(?i)csv"}, "expect": ["csv-cleanup"]},
]


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, Server]]:
    tmp = tmp_path_factory.mktemp("live")
    downstream = Downstream("grpc", fail_first=2)  # two failed exports: the failure panels have data
    extra: dict[str, Any] = {
        "expectations": EXPECT,
        "evaluators": {"skill_omission": {"sampling": 100}},
        "export": {
            "otlp": {
                "endpoint": downstream.endpoint,
                "logs": True,
                "retry": {"initial_interval": "0.1s", "max_interval": "0.2s"},
            }
        },
    }
    judge_server = FakeAnthropic().start()  # every judge panel and rule must have data too
    extra["judge"] = {"base_url": judge_server.base_url, "api_key": "test-key"}
    srv = Server(tmp, extra)
    prom = Prometheus(tmp, {"skillgauge": [f"127.0.0.1:{srv.status_port}"]})
    try:
        traces, logs = fixture_requests()
        prom.wait_scrapes(2)
        # Two waves of the same recordings (the second as new sessions), so every counter
        # has moved between scrapes and rate() / increase() have something to say.
        for wave in ("", "-w2"):
            send_grpc(srv.grpc_port, [renamed(r, wave) for r in traces], [renamed(r, wave) for r in logs])
            wait_for(lambda: metric_value(srv.metrics(), "skillgauge_sessions_open") == 0, timeout=30)
            wait_for(
                lambda: metric_value(srv.metrics(), "skillgauge_export_backlog", exporter="otlp_traces") == 0,
                timeout=30,
            )
            prom.wait_scrapes(3)
        # One refused request (not OTLP protobuf or JSON): the ingest panels have a refusal.
        post = urllib.request.Request(f"{srv.http_url}/v1/traces", b"hello", {"Content-Type": "text/plain"})
        try:
            urllib.request.urlopen(post, timeout=5)
        except urllib.error.HTTPError as err:
            assert err.code == 415
        prom.wait_scrapes(3)
        yield prom, srv
    finally:
        prom.stop()
        srv.stop()
        downstream.stop()
        judge_server.stop()


def _has_data(prom: Prometheus, expr: str) -> bool:
    for sample in prom.query(expr):
        value = float(sample["value"][1])
        if not math.isnan(value):
            return True
    return False


def _check(prom: Prometheus, queries: dict[str, str]) -> None:
    empty = {name: q for name, q in queries.items() if not _has_data(prom, q)}
    assert not empty, f"no data: {json.dumps(empty, indent=1)}"


def _dashboard_queries() -> dict[str, str]:
    queries = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in GRAFANA_VARS.items():
                expr = expr.replace(var, value)
            queries[f"{panel['title']} / {target['refId']}"] = expr
    return queries


def _rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


_COMPARISON = re.compile(r"\s*(>|<|>=|<=|==|!=)\s*[0-9.e+-]+\s*$")


def alert_operands(expr: str) -> list[str]:
    """The signals an alert compares: ``a > 1 and on() b == 0`` -> [a, b]."""
    parts = re.split(r"\s+and(?:\s+on\(\))?\s+", expr.strip())
    return [_COMPARISON.sub("", p).strip() for p in parts]


def test_every_dashboard_query_returns_data(scraped: tuple[Prometheus, Server]) -> None:
    prom, _ = scraped
    queries = _dashboard_queries()
    assert len(queries) >= 30
    _check(prom, queries)


def test_every_rule_evaluates_and_every_alert_signal_has_data(scraped: tuple[Prometheus, Server]) -> None:
    prom, _ = scraped
    groups = prom.api("rules")["groups"]
    loaded = [r for g in groups for r in g["rules"]]
    assert len(loaded) == len(_rules())
    assert [r["name"] for r in loaded if r["health"] != "ok"] == []
    records = {r["record"]: r["expr"] for r in _rules() if "record" in r}
    queries = {name: name for name in records}
    for rule in _rules():
        if "alert" in rule:
            assert rule["annotations"]["runbook"], rule["alert"]
            for i, operand in enumerate(alert_operands(rule["expr"])):
                queries[f"{rule['alert']}[{i}]"] = operand
    empty = {name for name, q in queries.items() if not _has_data(prom, q)}
    assert not empty, f"no data: {sorted(empty)}"


def test_promtool_accepts_the_metrics_exposition(scraped: tuple[Prometheus, Server]) -> None:
    _, srv = scraped
    text = srv.metrics()
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Low cardinality: no session id ever becomes a label value.
    assert "strands-right_skill-0001" not in text


def test_alert_operands_split_as_documented() -> None:
    assert alert_operands("a:b > 0.2") == ["a:b"]
    assert alert_operands("x > 0 and on() y == 0") == ["x", "y"]
    assert alert_operands("(time() - max by (e) (m)) > 21600 and on() z > 0") == [
        "(time() - max by (e) (m))",
        "z",
    ]


def test_dashboard_is_provisioned_and_wellformed() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "skillgauge"
    titles = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    assert titles[0].startswith("Coverage")  # coverage first
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    provider = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "skillgauge.yaml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/skillgauge"
