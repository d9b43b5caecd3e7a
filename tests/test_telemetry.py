"""Skill labels stay bounded: in number, in length, and the operator's names come first."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from support import FRAMEWORKS, Server, metric_value, wait_for

from collector.state.metrics import CoverageMetrics
from collector.telemetry import MAX_LABEL_LENGTH, MAX_SKILL_LABELS, OTHER, SkillLabels
from evaluators.evidence import Catalog, CatalogEntry, Session, SkillLoad
from evaluators.result import EvaluationResult

RECORDING = FRAMEWORKS / "strands" / "right_skill_latest.traces.jsonl"
RECORDED_NAMES = ("csv-cleanup", "release-notes", "incident-report")


def _session(i: int, names: list[str]) -> Session:
    catalog = Catalog()
    catalog.advertise([CatalogEntry(n, "d" * 100) for n in names], "available_skills_xml")
    return Session(
        f"s{i}",
        framework="strands",
        catalog=catalog,
        skill_loads=[SkillLoad(names[0], "loaded", "skill_tool", "00" * 8, "00" * 16)],
    )


def test_a_name_longer_than_the_spec_maximum_is_other() -> None:
    labels = SkillLabels()
    long = "a" * (MAX_LABEL_LENGTH + 1)
    labels.learn([long, "a" * MAX_LABEL_LENGTH])
    assert labels(long) == OTHER
    assert labels("a" * MAX_LABEL_LENGTH) == "a" * MAX_LABEL_LENGTH
    labels.reserve([long])
    assert labels(long) == OTHER


def test_sessions_with_huge_skill_names_keep_every_metrics_line_short() -> None:
    registry = CollectorRegistry()
    metrics = CoverageMetrics(registry)
    for i in range(20):
        names = [f"{i}-{k}-" + "x" * 20_000 for k in range(3)]
        result = EvaluationResult("skill_selection_accuracy", "judged", "loaded", session_id=f"s{i}", revision=1,
                                  score=1.0, label="pass", passed=True, skill=names[0])
        metrics.session_evaluated(_session(i, names), [result], 0.1)
    text = generate_latest(registry).decode()
    assert max(len(line) for line in text.splitlines()) < 2_000
    assert 'skill="other"' in text


def test_a_large_catalog_seen_first_cannot_push_a_registry_skill_to_other() -> None:
    labels = SkillLabels()
    labels.learn([f"catalog-{i}" for i in range(250)])  # takes every slot it can
    labels.reserve(["release-notes"])  # the registry, read later
    assert labels("release-notes") == "release-notes"
    later = SkillLabels()
    later.reserve(["release-notes", "Incident_Report"])  # the registry and expectations, first
    later.learn([f"catalog-{i}" for i in range(250)])
    assert later("release-notes") == "release-notes"
    assert later("incident-report") == "incident-report"
    assert later(f"catalog-{MAX_SKILL_LABELS - 3}") == f"catalog-{MAX_SKILL_LABELS - 3}"
    assert later(f"catalog-{MAX_SKILL_LABELS - 2}") == OTHER  # observed names take what is left
    assert sum(later(f"catalog-{i}") != OTHER for i in range(250)) == MAX_SKILL_LABELS - 2


def _renamed(i: int) -> bytes:
    text = RECORDING.read_text().replace("strands-right_skill_latest-0001", f"huge-names-{i:04}")
    for name in RECORDED_NAMES:
        text = text.replace(name, f"{name}-{i}-" + "x" * 20_000)
    # Each session its own traces: a trace binds to one session.
    text = re.sub(r'"traceId": "([0-9a-f]{4})', f'"traceId": "{i:04x}', text)
    return text.encode()


def test_serve_with_20_sessions_of_20kb_skill_names_keeps_metrics_lines_short(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"expectations": [{"when": {"user_message": "."}, "expect": ["release-notes"]}]})
    try:
        before = max(len(line) for line in srv.metrics().splitlines())
        for i in range(20):
            post = urllib.request.Request(f"{srv.http_url}/v1/traces", _renamed(i),
                                          {"Content-Type": "application/json"})
            with urllib.request.urlopen(post, timeout=10) as resp:
                assert resp.status == 200
        def evaluated() -> str | None:
            text = srv.metrics()
            count = sum(float(line.rpartition(" ")[2]) for line in text.splitlines()
                        if line.startswith("skillgauge_sessions_evaluated_total{"))
            return text if count >= 20 else None

        text = wait_for(evaluated, timeout=30)
        longest = max(len(line) for line in text.splitlines())
        assert longest < 2_000, (before, longest)
        assert metric_value(text, "skillgauge_skill_loads_total", skill="other") >= 20
        assert metric_value(text, "skillgauge_expected_skill_checks_total", skill="release-notes") >= 20
    finally:
        srv.stop()
