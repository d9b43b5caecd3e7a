"""Tenants' own limits against a real ``serve``: a tenant at its ``max_open_sessions`` is
answered with backpressure while another tenant opens sessions; a tenant past its
``judge_usd_per_day`` gets ``skipped / budget_exhausted`` on its own rows while another's
same session is judged; per-tenant figures on /metrics; and the config's mistakes."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropic
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import Server, metric_value, wait_for
from test_tenants import OPERATOR, TEAM_A, TEAM_B, _coverage, _grpc_send, _request

from collector.config import ConfigError, parse


def _config(tmp: Path, a: dict[str, Any], b: dict[str, Any], **extra: Any) -> dict[str, Any]:
    (tmp / "team-b-token").write_text(f"{TEAM_B}\n")
    return {
        "auth": {
            "tokens": [
                {"bearer_token": TEAM_A, "tenant": "team-a", **a},
                {"bearer_token_file": str(tmp / "team-b-token"), "tenant": "team-b", **b},
                {"bearer_token": OPERATOR, "tenant": "*"},
            ]
        },
        **extra,
    }


def _one_span(session: str, n: int) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=(n + 1).to_bytes(16, "big"), span_id=(n + 1).to_bytes(8, "big"), name="chat"
    )
    span.attributes.add(key="session.id").value.string_value = session
    return request.SerializeToString()


def _post(srv: Server, token: str, body: bytes) -> tuple[int, str | None]:
    request = urllib.request.Request(
        f"{srv.http_url}/v1/traces",
        body,
        {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status), None
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Retry-After")


def test_a_tenant_at_its_max_open_sessions_is_answered_with_backpressure_and_others_are_not(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, {"max_open_sessions": 2}, {}, sessions={"idle_timeout": "120s"})
    srv = Server(tmp_path, config, status_token=OPERATOR)
    try:
        for n in range(2):
            assert _post(srv, TEAM_A, _one_span(f"a-{n}", n)) == (200, None)
        wait_for(lambda: metric_value(srv.metrics(), "skillgauge_tenant_sessions_open", tenant="team-a") == 2)
        code, retry_after = _post(srv, TEAM_A, _one_span("a-2", 2))
        assert code == 503 and retry_after is not None
        for n in range(3):  # team-b is not held back by team-a's limit
            assert _post(srv, TEAM_B, _one_span(f"b-{n}", 10 + n)) == (200, None)
        assert _post(srv, TEAM_A, _one_span("a-0", 20)) == (503, "5")  # at its limit: refused whole
        text = wait_for(
            lambda: (t := srv.metrics())
            and metric_value(t, "skillgauge_tenant_sessions_open", tenant="team-b") == 3
            and t
        )
        assert metric_value(text, "skillgauge_tenant_sessions_open", tenant="team-a") == 2
        assert metric_value(text, "skillgauge_tenant_max_open_sessions", tenant="team-a") == 2
        assert metric_value(text, "skillgauge_tenant_limited_total", tenant="team-a", limit="max_open_sessions") == 2
        assert metric_value(text, "skillgauge_sessions_open") == 5
        line = next(x for x in srv.log().splitlines() if "max_open_sessions" in x)
        assert "tenant team-a" in line
    finally:
        srv.stop()


def test_a_tenant_past_its_judge_budget_is_skipped_on_its_own_rows_only(
    tmp_path: Path, fake_judge: FakeAnthropic
) -> None:
    judge = {"judge": {"base_url": fake_judge.base_url, "api_key": "test-key"}}
    config = _config(tmp_path, {"judge_usd_per_day": 0.000001}, {"judge_usd_per_day": 100}, **judge)
    srv = Server(tmp_path, config, status_token=OPERATOR)
    session = "strands-right_skill-0001"
    try:
        _grpc_send(srv, TEAM_A, _request("right_skill"))
        _grpc_send(srv, TEAM_B, _request("right_skill"))
        a = wait_for(lambda: _coverage(srv, f"/v1/sessions/{session}", TEAM_A), timeout=30)
        b = wait_for(lambda: _coverage(srv, f"/v1/sessions/{session}", TEAM_B), timeout=30)
        judged_a = [r for r in a["results"] if r["evaluation"] == "skill_selection_accuracy"]
        judged_b = [r for r in b["results"] if r["evaluation"] == "skill_selection_accuracy"]
        assert [(r["status"], r["reason"]) for r in judged_a] == [("skipped", "budget_exhausted")]
        assert "tenant team-a usd_per_day budget" in judged_a[0]["explanation"]
        assert [r["status"] for r in judged_b] == ["judged"]
        text = srv.metrics()
        assert metric_value(text, "skillgauge_tenant_limited_total", tenant="team-a", limit="judge_usd_per_day") >= 1
        assert metric_value(text, "skillgauge_tenant_limited_total", tenant="team-b", limit="judge_usd_per_day") == 0
        assert metric_value(text, "skillgauge_tenant_judge_usd_today", tenant="team-a") == 0
        assert metric_value(text, "skillgauge_tenant_judge_usd_today", tenant="team-b") > 0
        assert metric_value(text, "skillgauge_tenant_judge_usd_per_day", tenant="team-b") == 100
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (
            [{"bearer_token": "x" * 20, "tenant": "*", "max_open_sessions": 5}],
            'an operator token (tenant "*") has no limits of its own',
        ),
        (
            [
                {"bearer_token": "x" * 20, "tenant": "team-a", "max_open_sessions": 5},
                {"bearer_token": "y" * 20, "tenant": "team-a", "max_open_sessions": 6},
            ],
            "tenant 'team-a' has max_open_sessions 5 in one entry and 6 in another",
        ),
        ([{"bearer_token": "x" * 20, "tenant": "team-a", "judge_usd_per_day": 0}], "judge_usd_per_day"),
    ],
)
def test_tenant_limit_mistakes_are_named(tokens: list[dict[str, Any]], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"auth": {"tokens": tokens}})
    assert expected in str(err.value)


def test_a_limit_given_once_applies_to_every_token_of_the_tenant() -> None:
    config = parse(
        {
            "auth": {
                "tokens": [
                    {"bearer_token": "x" * 20, "tenant": "team-a", "max_open_sessions": 5},
                    {"bearer_token": "y" * 20, "tenant": "team-a", "judge_usd_per_day": 2.5},
                ]
            }
        }
    )
    limits = config.tenant_limits["team-a"]
    assert (limits.max_open_sessions, limits.judge_usd_per_day) == (5, 2.5)
