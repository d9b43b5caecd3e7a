"""Tenants against a real ``serve``, with the real SDK exporters (gRPC and HTTP, the token in
their headers): the same ``session.id`` from two tenants makes two sessions with their own
verdicts, each token reads only its tenant's sessions (another tenant's id answers 404), an
operator token reads any, a kill -9 and restart keep each request's tenant, the coverage
metrics and exported evaluation spans name the tenant; and the tenant config's mistakes."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from downstream import Downstream
from fake_anthropic import FakeAnthropic
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, readable_spans, trace_requests, wait_for

from collector.config import ConfigError, parse
from collector.receiver.auth import Bearer

TEAM_A = "team-a-4f1c9e0b7d2a6c3e"
TEAM_B = "team-b-8a2d5f7c1e9b0d4a"
OPERATOR = "operator-6e3b1a9d4c7f2e05"
SESSION = "strands-right_skill-0001"  # the id of the right_skill recording; team-b reuses it
ONLY_B = "strands-multi_turn-0001"
OPERATORS = "strands-denied-0001"  # sent with the operator's token: the default tenant's


def _request(name: str, session_id: str | None = None) -> ExportTraceServiceRequest:
    """A strands recording, its ``session.id`` set to ``session_id`` where it carries one."""
    (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
    if session_id is not None:
        for rs in request.resource_spans:
            for kv in rs.resource.attributes:
                if kv.key == "session.id":
                    kv.value.string_value = session_id
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for kv in span.attributes:
                        if kv.key == "session.id":
                            kv.value.string_value = session_id
    return request


def _span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _total(text: str, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` with these labels (``metric_value`` finds the first)."""
    total = 0.0
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head.startswith(f"{name}{{") and all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def _grpc_send(srv: Server, token: str, request: ExportTraceServiceRequest) -> None:
    exporter = GrpcSpanExporter(
        endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True, headers={"authorization": f"Bearer {token}"}, timeout=5
    )
    assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS


def _http_send(srv: Server, token: str, request: ExportTraceServiceRequest) -> None:
    exporter = HttpSpanExporter(
        endpoint=f"{srv.http_url}/v1/traces", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert exporter.export(readable_spans(request)) == SpanExportResult.SUCCESS


def _get(srv: Server, path: str, token: str) -> tuple[int, Any]:
    request = urllib.request.Request(f"{srv.status_url}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _coverage(srv: Server, path: str, token: str) -> dict[str, Any] | None:
    """The latest evaluated revision's coverage line, with its results, once there is one."""
    code, body = _get(srv, path, token)
    if code != 200 or "revisions" not in body:
        return None
    records = body["revisions"][-1]["records"]
    (coverage,) = [r["coverage"] for r in records if "coverage" in r]
    return {**coverage, "results": [r for r in records if "coverage" not in r]}


def _config(tmp: Path, fake_judge: FakeAnthropic, **extra: Any) -> dict[str, Any]:
    (tmp / "team-b-token").write_text(f"{TEAM_B}\n")
    return {
        "auth": {
            "tokens": [
                {"bearer_token": "${env:SG_TEAM_A_TOKEN}", "tenant": "team-a"},
                {"bearer_token_file": str(tmp / "team-b-token"), "tenant": "team-b"},
                {"bearer_token": "${env:SG_OPERATOR_TOKEN}", "tenant": "*"},
            ]
        },
        "judge": {"base_url": fake_judge.base_url, "api_key": "test-key"},
        **extra,
    }


_ENV = {"SG_TEAM_A_TOKEN": TEAM_A, "SG_OPERATOR_TOKEN": OPERATOR}


@pytest.fixture(scope="module")
def downstream() -> Iterator[Downstream]:
    receiver = Downstream("grpc")
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def tenants(
    tmp_path_factory: pytest.TempPathFactory, fake_judge: FakeAnthropic, downstream: Downstream
) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("tenants"))
    export = {"otlp": {"endpoint": downstream.endpoint, "retry": {"initial_interval": "0.1s"}}}
    srv = Server(tmp, _config(tmp, fake_judge, export=export), env=_ENV, status_token=OPERATOR)
    # The same session.id from two tenants, with different spans: team-a's loads a skill,
    # team-b's (the no_skill recording under team-a's id) loads none.
    _grpc_send(srv, TEAM_A, _request("right_skill"))
    _http_send(srv, TEAM_B, _request("no_skill", SESSION))
    _grpc_send(srv, TEAM_B, _request("multi_turn"))
    _http_send(srv, OPERATOR, _request("denied"))
    yield srv
    srv.stop()


def test_the_same_session_id_from_two_tenants_makes_two_sessions_with_their_own_verdicts(tenants: Server) -> None:
    a = wait_for(lambda: _coverage(tenants, f"/v1/sessions/{SESSION}", TEAM_A), timeout=30)
    b = wait_for(lambda: _coverage(tenants, f"/v1/sessions/{SESSION}", TEAM_B), timeout=30)
    # Neither reopened nor joined the other: each is revision 1 with only its own spans.
    assert (a["tenant"], a["revision"], a["spans"]) == ("team-a", 1, _span_count(_request("right_skill")))
    assert (b["tenant"], b["revision"], b["spans"]) == ("team-b", 1, _span_count(_request("no_skill")))
    assert a["loads_by_status"]["loaded"] == 1 and not any(b["loads_by_status"].values())
    selection_a = [r for r in a["results"] if r["evaluation"] == "skill_selection_accuracy"]
    selection_b = [r for r in b["results"] if r["evaluation"] == "skill_selection_accuracy"]
    assert len(selection_a) == 1 and selection_a[0]["status"] == "judged" and not selection_b
    assert {r["tenant"] for r in a["results"]} == {"team-a"}
    assert {r["tenant"] for r in b["results"]} == {"team-b"}


def test_a_token_reads_only_its_tenants_sessions_and_another_tenants_id_is_404(tenants: Server) -> None:
    wait_for(lambda: _coverage(tenants, f"/v1/sessions/{ONLY_B}", TEAM_B), timeout=30)
    code, unknown = _get(tenants, "/v1/sessions/no-such-session", TEAM_A)
    assert code == 404
    code, other = _get(tenants, f"/v1/sessions/{ONLY_B}", TEAM_A)
    assert code == 404
    # The same answer as for an id nobody sent: nothing tells team-a that team-b has it.
    assert {k: v for k, v in other.items() if k != "session_id"} == {
        k: v for k, v in unknown.items() if k != "session_id"
    }
    assert ONLY_B not in json.dumps(_get(tenants, f"/v1/sessions/{SESSION}", TEAM_A)[1])
    # The operator's token reads any tenant's, naming it; without a tenant, the default one's.
    assert _coverage(tenants, f"/v1/sessions/{ONLY_B}?tenant=team-b", OPERATOR)["tenant"] == "team-b"
    assert _coverage(tenants, f"/v1/sessions/{SESSION}?tenant=team-a", OPERATOR)["tenant"] == "team-a"
    assert _get(tenants, f"/v1/sessions/{SESSION}", OPERATOR)[0] == 404
    # What the operator's token sent is in the default tenant: no tenant's token reads it.
    operators = wait_for(lambda: _coverage(tenants, f"/v1/sessions/{OPERATORS}", OPERATOR), timeout=30)
    assert "tenant" not in operators
    assert _get(tenants, f"/v1/sessions/{OPERATORS}", TEAM_A)[0] == 404
    # A tenant's token cannot name another tenant.
    assert _coverage(tenants, f"/v1/sessions/{ONLY_B}?tenant=team-b", TEAM_A) is None
    assert _get(tenants, "/v1/sessions/x", "not-a-token")[0] == 401
    # /metrics: any valid token, as before.
    for token in (TEAM_A, TEAM_B, OPERATOR):
        request = urllib.request.Request(f"{tenants.status_url}/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200


def _listed(srv: Server, query: str, token: str) -> list[tuple[str, str]]:
    code, body = _get(srv, f"/v1/sessions{query}", token)
    assert code == 200, body
    return sorted((row["tenant"], row["session_id"]) for row in body["sessions"])


def test_the_listing_overview_and_pages_show_only_the_tokens_tenant(tenants: Server) -> None:
    for path, token in ((ONLY_B, TEAM_B), (SESSION, TEAM_A), (SESSION, TEAM_B), (OPERATORS, OPERATOR)):
        wait_for(lambda path=path, token=token: _coverage(tenants, f"/v1/sessions/{path}", token), timeout=30)
    assert _listed(tenants, "", TEAM_A) == [("team-a", SESSION)]
    assert _listed(tenants, "?tenant=team-b", TEAM_A) == []  # cannot name another tenant
    assert _listed(tenants, "", TEAM_B) == [("team-b", ONLY_B), ("team-b", SESSION)]
    everyone = [("", OPERATORS), ("team-a", SESSION), ("team-b", ONLY_B), ("team-b", SESSION)]
    assert _listed(tenants, "", OPERATOR) == everyone
    assert _listed(tenants, "?tenant=team-b", OPERATOR) == [("team-b", ONLY_B), ("team-b", SESSION)]
    # A row's detail link names its tenant, so the operator's token can follow it.
    rows = _get(tenants, "/v1/sessions?tenant=team-b", OPERATOR)[1]["sessions"]
    for row in rows:
        assert row["detail"].endswith("?tenant=team-b")
        assert _get(tenants, row["detail"], OPERATOR)[0] == 200
        assert _get(tenants, row["detail"], TEAM_B)[0] == 200
    # The pages: a team's token sees its sessions and not the other team's.
    request = urllib.request.Request(
        f"{tenants.status_url}/ui/sessions", headers={"Authorization": f"Bearer {TEAM_A}"}
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        page = resp.read().decode()
    assert SESSION in page and ONLY_B not in page
    request = urllib.request.Request(
        f"{tenants.status_url}/ui/sessions/{ONLY_B}", headers={"Authorization": f"Bearer {TEAM_A}"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 404


def test_coverage_metrics_carry_the_configured_tenants_only(tenants: Server) -> None:
    wait_for(lambda: _coverage(tenants, f"/v1/sessions/{ONLY_B}", TEAM_B), timeout=30)
    wait_for(lambda: _coverage(tenants, f"/v1/sessions/{SESSION}", TEAM_A), timeout=30)
    wait_for(lambda: _coverage(tenants, f"/v1/sessions/{OPERATORS}", OPERATOR), timeout=30)
    text = tenants.metrics()
    assert _total(text, "skillgauge_sessions_evaluated_total", tenant="team-a") == 1
    assert _total(text, "skillgauge_sessions_evaluated_total", tenant="team-b") == 2
    assert _total(text, "skillgauge_sessions_evaluated_total", tenant="") == 1  # the operator's
    assert _total(text, "skillgauge_skill_loads_total", tenant="team-a", status="loaded") == 1
    assert _total(text, "skillgauge_sessions_without_skill_load_total", tenant="team-b") >= 1
    judged_a = _total(
        text, "skillgauge_evaluations_total", evaluation="skill_selection_accuracy", status="judged", tenant="team-a"
    )
    assert judged_a == 1
    seen = set(re.findall(r'tenant="([^"]*)"', text))
    assert seen == {"team-a", "team-b", ""}
    assert "listening: " in tenants.log() and "tenants team-a team-b" in tenants.log()


def test_exported_evaluation_spans_name_the_tenant(tenants: Server, downstream: Downstream) -> None:
    a = wait_for(lambda: _coverage(tenants, f"/v1/sessions/{SESSION}", TEAM_A), timeout=30)
    b = wait_for(lambda: _coverage(tenants, f"/v1/sessions/{SESSION}", TEAM_B), timeout=30)
    expected = {"team-a": len(a["results"]) + 1, "team-b": len(b["results"]) + 1}  # + the coverage span

    def by_tenant() -> dict[str, int] | None:
        counts: dict[str, int] = {}
        for _, span in downstream.spans():
            attrs = {kv.key: kv.value.string_value for kv in span.attributes}
            if attrs.get("session.id") == SESSION:
                tenant = attrs.get("skillgauge.tenant", "")
                counts[tenant] = counts.get(tenant, 0) + 1
        return counts if counts == expected else None

    wait_for(by_tenant, timeout=20)


def test_a_restart_after_kill_9_keeps_each_requests_tenant(tmp_path: Path, fake_judge: FakeAnthropic) -> None:
    config = _config(tmp_path, fake_judge, sessions={"idle_timeout": "1h"})
    first = Server(tmp_path, config, env=_ENV, status_token=OPERATOR)
    try:
        _http_send(first, TEAM_A, _request("right_skill"))
        _grpc_send(first, TEAM_B, _request("no_skill", SESSION))
        for token in (TEAM_A, TEAM_B):  # acknowledged and open, not yet evaluated
            code, body = _get(first, f"/v1/sessions/{SESSION}", token)
            assert code == 200 and "open" in body and "revisions" not in body
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
    finally:
        first.stop()
    config["sessions"] = {"idle_timeout": "1s"}
    second = Server(tmp_path, config, env=_ENV, status_token=OPERATOR)
    try:
        a = wait_for(lambda: _coverage(second, f"/v1/sessions/{SESSION}", TEAM_A), timeout=30)
        b = wait_for(lambda: _coverage(second, f"/v1/sessions/{SESSION}", TEAM_B), timeout=30)
        assert (a["tenant"], a["revision"], a["spans"]) == ("team-a", 1, _span_count(_request("right_skill")))
        assert (b["tenant"], b["revision"], b["spans"]) == ("team-b", 1, _span_count(_request("no_skill")))
        assert _get(second, f"/v1/sessions/{SESSION}", OPERATOR)[0] == 404  # nothing fell to the default
        assert "recovered from the spool" in second.log()
    finally:
        second.stop()


def test_tokens_without_a_tenant_keep_working_in_the_default_tenant() -> None:
    old = parse({"auth": {"bearer_token": "abc123"}}).auth
    assert old is not None and old.tenants == frozenset({""})
    bearer = Bearer(
        parse(
            {"auth": {"tokens": [{"bearer_token": "abc123", "tenant": "team-a"}, {"bearer_token": "def456"}]}}
        ).auth  # type: ignore[arg-type]
    )
    assert bearer.tenant_of("Bearer abc123") == "team-a"
    assert bearer.tenant_of("Bearer def456") == ""
    assert bearer.tenant_of("Bearer abc1234") is None and bearer.tenant_of(None) is None


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        ({"tokens": [{"bearer_token": "abc", "tenant": "Team A"}]}, "auth.tokens.0.tenant: 'Team A' is not a tenant"),
        ({"tokens": [{"bearer_token": "abc", "tenant": "x" * 33}]}, "at most 32 characters"),
        ({"tokens": [{"bearer_token": "abc", "tenant": "-a"}]}, "is not a tenant: a tenant is a short slug"),
        ({"tokens": [{"bearer_token": "abc", "tenant": "**"}]}, 'or "*" for an operator token'),
        ({"tokens": []}, "auth: tokens is empty - list at least one"),
        (
            {"tokens": [{"bearer_token": "abc", "tenant": "a"}, {"bearer_token": "abc", "tenant": "b"}]},
            "tokens.1: the same token is listed for tenants 'a' and 'b' - give each tenant a token of its own",
        ),
        ({"tokens": [{"tenant": "a"}]}, "tokens.0: set exactly one of bearer_token"),
        ({"tokens": [{"bearer_token": "   ", "tenant": "a"}]}, "tokens.0: the bearer token is empty"),
        ({"bearer_token": "x", "tokens": [{"bearer_token": "y"}]}, "set either tokens"),
        ({"tokens": [{"bearer_token": "abc", "tenat": "a"}]}, "auth.tokens.0.tenat: unknown key"),
    ],
)
def test_tenant_config_mistakes_name_the_field_and_the_fix(auth: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse({"auth": auth})
    assert expected in str(err.value)
    for token in ("abc", "   "):
        assert f"'{token}'" not in str(err.value)  # a token is never echoed
