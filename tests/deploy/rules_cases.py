"""The promtool unit tests for deploy/prometheus/rules.yml, as a table.

``python tests/deploy/rules_cases.py`` rewrites deploy/prometheus/rules_test.yml from this
table (annotations are copied from rules.yml, so a reworded runbook cannot drift); the test
suite checks the file is current and runs ``promtool test rules`` on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "rules.yml"
RULES_TEST = DEPLOY / "prometheus" / "rules_test.yml"

# (name, input series, [(eval_time, alert, [(extra labels, summary)])], [promql checks])
Case = tuple[
    str,
    dict[str, str],
    list[tuple[str, str, list[tuple[dict[str, str], str]]]],
    list[tuple[str, str, list[tuple[str, float]]]],
]

CASES: list[Case] = [
    (
        "skipped skills: 50% of sessions with expectations miss one",
        {
            "skillgauge_sessions_with_expectations_total": "0+10x120",
            "skillgauge_sessions_with_missed_expectations_total": "0+5x120",
            'skillgauge_expected_skill_checks_total{skill="release-notes"}': "0+10x120",
            'skillgauge_expected_skill_misses_total{skill="release-notes",reason="not_invoked"}': "0+5x120",
            'skillgauge_expected_skill_checks_total{skill="csv-cleanup"}': "0+4x120",
        },
        [
            ("10m", "SkillgaugeSkippedSkillRateHigh", []),  # not yet: for 15m
            (
                "30m",
                "SkillgaugeSkippedSkillRateHigh",
                [({}, "50% of sessions with an expected skill did not load it")],
            ),
        ],
        [
            (
                "30m",
                "skillgauge:skipped_skill_rate_by_skill:ratio_rate1h",
                [('{skill="release-notes"}', 0.5), ('{skill="csv-cleanup"}', 0.0)],
            )
        ],
    ),
    (
        "skipped skills: 10% is below the threshold",
        {
            "skillgauge_sessions_with_expectations_total": "0+10x120",
            "skillgauge_sessions_with_missed_expectations_total": "0+1x120",
        },
        [("60m", "SkillgaugeSkippedSkillRateHigh", [])],
        [],
    ),
    (
        "omission: 30% of omission verdicts say a skill was omitted",
        {
            'skillgauge_evaluation_verdicts_total{evaluation="skill_omission",skill="none",framework="strands",verdict="fail"}': "0+3x120",
            'skillgauge_evaluation_verdicts_total{evaluation="skill_omission",skill="none",framework="strands",verdict="pass"}': "0+7x120",
        },
        [
            (
                "45m",
                "SkillgaugeOmissionRateHigh",
                [
                    (
                        {},
                        "The judge finds a skill should have been used in 30% of catalog sessions that loaded none",
                    )
                ],
            )
        ],
        [],
    ),
    (
        "omission: no failing verdict at all reads as 0, not as no data",
        {
            'skillgauge_evaluation_verdicts_total{evaluation="skill_omission",skill="none",framework="adk",verdict="pass"}': "0+7x120",
        },
        [("45m", "SkillgaugeOmissionRateHigh", [])],
        [("45m", "skillgauge:omission_rate:ratio_rate1h", [("{}", 0.0)])],
    ),
    (
        "coverage: no judge configured, selection is skipped",
        {
            'skillgauge_evaluations_total{evaluation="skill_selection_accuracy",status="skipped",reason="no_judge_configured"}': "0+8x120",
            'skillgauge_evaluations_total{evaluation="skill_selection_accuracy",status="judged",reason="ok"}': "0+2x120",
            'skillgauge_evaluations_total{evaluation="skill_instruction_following",status="not_applicable",reason="body_unavailable"}': "0+5x120",
            'skillgauge_evaluations_total{evaluation="skill_instruction_following",status="judged",reason="ok"}': "0+5x120",
            'skillgauge_evaluations_total{evaluation="skill_invoked",status="judged",reason="loaded"}': "0+5x120",
        },
        [
            (
                "45m",
                "SkillgaugeCoverageLow",
                [
                    (
                        {"evaluation": "skill_selection_accuracy"},
                        "Only 20% of skill_selection_accuracy results that could be judged were judged",
                    )
                ],
            )
        ],
        [
            (
                "45m",
                "skillgauge:judged_share:ratio_rate1h",
                [
                    ('{evaluation="skill_selection_accuracy"}', 0.2),
                    ('{evaluation="skill_instruction_following"}', 0.5),
                    ('{evaluation="skill_invoked"}', 1.0),
                ],
            )
        ],
    ),
    (
        "judge errors: 20% of calls time out",
        {
            'skillgauge_judge_requests_total{model="claude",outcome="ok"}': "0+8x60",
            'skillgauge_judge_requests_total{model="claude",outcome="timeout"}': "0+2x60",
        },
        [("30m", "SkillgaugeJudgeErrorsHigh", [({}, "20% of judge calls fail")])],
        [],
    ),
    (
        "judge queue: 90% full for 15 minutes, then drained",
        {
            'skillgauge_judge_queue_depth{instance="replica-0"}': "9000x15 100x30",
            'skillgauge_judge_queue_capacity{instance="replica-0"}': "10000x45",
            'skillgauge_judge_queue_depth{instance="replica-1"}': "5000x45",
            'skillgauge_judge_queue_capacity{instance="replica-1"}': "10000x45",
        },
        [
            ("5m", "SkillgaugeJudgeQueueFilling", []),  # not yet: for 10m
            (
                "12m",
                "SkillgaugeJudgeQueueFilling",
                [
                    (
                        {"instance": "replica-0"},
                        "The judge queue of replica-0 is 90% full; at judge.max_queue it refuses new requests",
                    )
                ],
            ),
            ("30m", "SkillgaugeJudgeQueueFilling", []),
        ],
        [("12m", "skillgauge:judge_queue:fill_ratio", [('{instance="replica-0"}', 0.9), ('{instance="replica-1"}', 0.5)])],
    ),
    (
        "budget: some evaluations skipped for budget",
        {
            'skillgauge_evaluations_total{evaluation="skill_selection_accuracy",status="skipped",reason="budget_exhausted"}': "0+1x60",
            'skillgauge_evaluations_total{evaluation="skill_selection_accuracy",status="judged",reason="ok"}': "0+3x60",
        },
        [
            (
                "20m",
                "SkillgaugeJudgeBudgetExhausted",
                [({}, "Judge evaluations are being skipped: the token / USD budget is spent")],
            )
        ],
        [],
    ),
    (
        "dead man: sessions close, nothing judged",
        {
            'skillgauge_sessions_closed_total{reason="idle_timeout"}': "0+5x120",
            'skillgauge_evaluations_total{evaluation="skill_selection_accuracy",status="skipped",reason="no_judge_configured"}': "0+5x120",
        },
        [
            (
                "60m",
                "SkillgaugeNoEvaluations",
                [
                    (
                        {},
                        "Sessions keep closing but nothing has been judged for 30 minutes (dead man's switch)",
                    )
                ],
            )
        ],
        [],
    ),
    (
        "dead man: quiet while verdicts keep coming",
        {
            'skillgauge_sessions_closed_total{reason="idle_timeout"}': "0+5x120",
            'skillgauge_evaluations_total{evaluation="skill_invoked",status="judged",reason="loaded"}': "0+5x120",
        },
        [("60m", "SkillgaugeNoEvaluations", [])],
        [],
    ),
    (
        "an evaluator silent for hours while sessions close",
        {
            'skillgauge_sessions_closed_total{reason="idle_timeout"}': "0+5x500",
            # promtool's clock starts at 0: a last verdict at t=600s is stale from 6h10m on.
            'skillgauge_last_evaluation_timestamp_seconds{evaluation="skill_selection_accuracy"}': "600x500",
            'skillgauge_last_evaluation_timestamp_seconds{evaluation="skill_invoked"}': "600+60x500",
        },
        [
            ("5h", "SkillgaugeEvaluatorSilent", []),
            (
                "7h",
                "SkillgaugeEvaluatorSilent",
                [
                    (
                        {"evaluation": "skill_selection_accuracy"},
                        "skill_selection_accuracy has produced no verdict for over 6 hours while sessions close",
                    )
                ],
            ),
        ],
        [],
    ),
    (
        "export backlog grows while the downstream is away",
        # Flat at the evaluation minute: the alert reads a recording rule that promtool may
        # evaluate before or after it, so the summary's value must not depend on the order.
        {'skillgauge_export_backlog{exporter="otlp_traces"}': "0+20x40 800x20"},
        [
            (
                "45m",
                "SkillgaugeExportBacklogGrowing",
                [({"exporter": "otlp_traces"}, "800 results wait for otlp_traces and the backlog grows")],
            )
        ],
        [],
    ),
    (
        "export backlog drained: quiet",
        {'skillgauge_export_backlog{exporter="otlp_traces"}': "500-10x60"},
        [("30m", "SkillgaugeExportBacklogGrowing", [])],
        [],
    ),
    (
        "results dropped: the outbox overflowed",
        {'skillgauge_export_dropped_total{exporter="otlp_traces",reason="queue_full"}': "0+5x30"},
        [("10m", "SkillgaugeExportDroppingResults", [({}, "Results are being dropped by the exporter")])],
        [],
    ),
    (
        "ingest: 10% of requests refused",
        {
            'skillgauge_requests_total{protocol="grpc",signal="traces",outcome="ok"}': "0+90x60",
            'skillgauge_requests_total{protocol="grpc",signal="traces",outcome="error"}': "0+10x60",
        },
        [("20m", "SkillgaugeIngestRejecting", [({}, "10% of OTLP requests from agents are refused")])],
        [],
    ),
    (
        "storage: the shared store refuses writes for 15 minutes, after a burst that recovered",
        {
            'skillgauge_storage_write_failures_total{write="write"}': "0x30 0+2x15 30x30",
            'skillgauge_storage_write_failures_total{write="request"}': "0x5 0+3x3 9x70",
        },
        [
            ("25m", "SkillgaugeStorageFailing", []),  # the burst of refused requests: not 10m long
            ("38m", "SkillgaugeStorageFailing", []),  # failing since 31m: not yet for 10m
            (
                "43m",
                "SkillgaugeStorageFailing",
                [
                    (
                        {"write": "write"},
                        "Writes to skillgauge's store have kept failing for 10 minutes (write)",
                    )
                ],
            ),
            ("70m", "SkillgaugeStorageFailing", []),  # working again
        ],
        [],
    ),
]


# The alerts that link to the sessions behind their number: (the /ui/sessions filters, with
# {label} from the alert's labels; the Grafana panel id).  Written out, not copied from
# rules.yml, so that promtool checks what the templates render.
LINKED = {
    "SkillgaugeSkippedSkillRateHigh": ("evaluation=skill_invoked&passed=false&since=2h", 12),
    "SkillgaugeOmissionRateHigh": ("evaluation=skill_omission&passed=false&since=2h", 15),
    "SkillgaugeCoverageLow": ("evaluation={evaluation}&status=skipped,error&since=2h", 5),
}
DEFAULT_BASES = {"skillgauge_url": "http://localhost:9464", "grafana_url": "http://localhost:3000"}
# A Prometheus whose global.external_labels name where the browser reaches both.
EXTERNAL = {"skillgauge_url": "https://skillgauge.example:9464", "grafana_url": "https://grafana.example"}


def links(alert: str, labels: dict[str, str], bases: dict[str, str]) -> dict[str, str]:
    """The ``dashboard`` and ``sessions`` annotations ``alert`` renders with these labels."""
    if alert not in LINKED:
        return {}
    filters, panel = LINKED[alert]
    return {
        "dashboard": f"{bases['grafana_url']}/d/skillgauge/skillgauge?viewPanel={panel}",
        "sessions": f"{bases['skillgauge_url']}/ui/sessions?{filters.format(**labels)}",
    }


def _alerts() -> dict[str, dict[str, Any]]:
    rules = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}


def build() -> dict[str, Any]:
    alerts = _alerts()
    tests = []
    for name, series, alert_checks, expr_checks in CASES:
        test: dict[str, Any] = {
            "name": name,
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [
                {
                    "eval_time": at,
                    "alertname": alert,
                    "exp_alerts": [
                        {
                            "exp_labels": {**alerts[alert]["labels"], **labels},
                            "exp_annotations": {
                                "summary": summary,
                                "runbook": alerts[alert]["annotations"]["runbook"],
                                **links(alert, labels, DEFAULT_BASES),
                            },
                        }
                        for labels, summary in fired
                    ],
                }
                for at, alert, fired in alert_checks
            ],
        }
        if expr_checks:
            test["promql_expr_test"] = [
                {
                    "expr": expr,
                    "eval_time": at,
                    "exp_samples": [
                        {"labels": f"{expr}{labels}" if labels != "{}" else expr, "value": value}
                        for labels, value in samples
                    ],
                }
                for at, expr, samples in expr_checks
            ]
        tests.append(test)
    # The first case again, under a Prometheus with external labels: the links use them.
    linked = dict(tests[0], name=tests[0]["name"] + ", with external labels naming the URLs")
    linked["external_labels"] = EXTERNAL
    linked["alert_rule_test"] = [
        {
            **check,
            "exp_alerts": [
                {
                    "exp_labels": alert["exp_labels"],
                    "exp_annotations": {
                        **alert["exp_annotations"],
                        **links(check["alertname"], alert["exp_labels"], EXTERNAL),
                    },
                }
                for alert in check["exp_alerts"]
            ],
        }
        for check in tests[0]["alert_rule_test"]
    ]
    linked.pop("promql_expr_test", None)
    tests.append(linked)
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


def render() -> str:
    header = "# Generated by tests/deploy/rules_cases.py from its table; run `promtool test rules rules_test.yml`.\n"
    return header + yaml.safe_dump(build(), sort_keys=False, width=200)


if __name__ == "__main__":
    RULES_TEST.write_text(render())
