"""Bearer-token auth on both receivers and the status API, with the real SDK exporters; and
secrets (tokens, the judge's API key) that never reach the log."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fake_anthropic import FakeAnthropic
from google.rpc import code_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, metric_value, readable_spans, trace_requests, wait_for

from collector.receiver.auth import Bearer
from collector.receiver.config import BearerAuth

RECEIVER_TOKEN = "rcv-7f3a9c1e5b2d4f60aa"
STATUS_TOKEN = "status-0c9e8d7b6a5f4e3dbb"
OLD_STATUS_TOKEN = "status-old-91f0e2d3c4b5a6cc"  # a second line in the token file: rotation
API_KEY = "sk-ant-test-5e4d3c2b1a09ffee"
WRONG = "wrong-token-0123456789dd"
SECRETS = (RECEIVER_TOKEN, STATUS_TOKEN, OLD_STATUS_TOKEN, API_KEY, WRONG)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, fake_judge: FakeAnthropic) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("auth"))
    (tmp / "status-token").write_text(f"{OLD_STATUS_TOKEN}\n{STATUS_TOKEN}\n")
    (tmp / "api-key").write_text(f"{API_KEY}\n")
    config = {
        "auth": {"bearer_token": "${env:SG_RECEIVER_TOKEN}"},  # both receivers
        "status": {"auth": {"bearer_token_file": str(tmp / "status-token")}},  # its own token
        "judge": {"api_key_file": str(tmp / "api-key"), "base_url": fake_judge.base_url},
    }
    srv = Server(tmp, config, env={"SG_RECEIVER_TOKEN": RECEIVER_TOKEN}, status_token=STATUS_TOKEN)
    yield srv
    srv.stop()


def _spans(name: str = "right_skill") -> list[ReadableSpan]:
    (request,) = trace_requests(FRAMEWORKS / "strands" / f"{name}.traces.jsonl")
    return readable_spans(request)


def _rejected(srv: Server, protocol: str) -> float:
    return metric_value(
        srv.metrics(), "skillgauge_rejected_requests_total", protocol=protocol, reason="unauthenticated"
    )


def _grpc(srv: Server, token: str | None) -> GrpcSpanExporter:
    headers = {"authorization": f"Bearer {token}"} if token else None
    return GrpcSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True, headers=headers, timeout=5)


def _http(srv: Server, token: str | None) -> HttpSpanExporter:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces", headers=headers, timeout=5)


def test_grpc_wrong_or_missing_token_is_unauthenticated_right_token_accepted(secured: Server) -> None:
    before = _rejected(secured, "grpc")
    assert _grpc(secured, WRONG).export(_spans()) == SpanExportResult.FAILURE
    assert _grpc(secured, None).export(_spans()) == SpanExportResult.FAILURE
    assert secured.get_json("/v1/sessions/strands-right_skill-0001")[0] == 404  # nothing got in

    stub = trace_service_pb2_grpc.TraceServiceStub(grpc.insecure_channel(f"127.0.0.1:{secured.grpc_port}"))
    with pytest.raises(grpc.RpcError) as err:
        stub.Export(
            trace_service_pb2.ExportTraceServiceRequest(), metadata=(("authorization", f"Bearer {WRONG}"),)
        )
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert WRONG not in (err.value.details() or "")

    assert _grpc(secured, RECEIVER_TOKEN).export(_spans()) == SpanExportResult.SUCCESS
    assert secured.get_json("/v1/sessions/strands-right_skill-0001")[0] == 200
    assert _rejected(secured, "grpc") == before + 3


def test_http_wrong_token_is_401_with_a_status_body_right_token_accepted(secured: Server) -> None:
    before = _rejected(secured, "http")
    assert _http(secured, WRONG).export(_spans("no_skill")) == SpanExportResult.FAILURE

    for content_type in ("application/json", "application/x-protobuf"):
        req = urllib.request.Request(
            f"{secured.http_url}/v1/traces", b"{}", {"Content-Type": content_type, "Authorization": WRONG}
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 401
        assert err.value.headers["WWW-Authenticate"].startswith("Bearer")
        body = err.value.read()
        if content_type == "application/json":
            assert json.loads(body)["code"] == code_pb2.UNAUTHENTICATED
        else:
            assert status_pb2.Status.FromString(body).code == code_pb2.UNAUTHENTICATED
        assert WRONG.encode() not in body

    assert _http(secured, RECEIVER_TOKEN).export(_spans("no_skill")) == SpanExportResult.SUCCESS
    assert secured.get_json("/v1/sessions/strands-no_skill-0001")[0] == 200
    assert _rejected(secured, "http") == before + 3


def _status(srv: Server, path: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{srv.status_url}{path}", headers=headers), timeout=5
        ) as r:
            return int(r.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_status_api_guards_metrics_and_sessions_but_not_probes(secured: Server) -> None:
    assert _status(secured, "/healthz", None) == 200  # Kubernetes probes send no credentials
    assert _status(secured, "/readyz", None) == 200
    for path in ("/metrics", "/v1/sessions/anything"):
        assert _status(secured, path, None) == 401
        assert _status(secured, path, RECEIVER_TOKEN) == 401  # the receivers' token is not the status token
    assert _status(secured, "/metrics", STATUS_TOKEN) == 200
    assert _status(secured, "/metrics", OLD_STATUS_TOKEN) == 200  # both lines of the file are valid
    assert _status(secured, "/v1/sessions/anything", STATUS_TOKEN) == 404
    text = secured.metrics()
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="metrics") >= 2
    assert metric_value(text, "skillgauge_status_rejected_requests_total", endpoint="sessions") >= 2


def test_secrets_are_never_logged(secured: Server, fake_judge: FakeAnthropic) -> None:
    assert _grpc(secured, RECEIVER_TOKEN).export(_spans("multi_turn")) == SpanExportResult.SUCCESS
    seen = wait_for(lambda: fake_judge.requests, timeout=15)  # a session closed and was judged
    headers = seen[0].headers
    assert API_KEY in (headers.get("x-api-key", ""), headers.get("authorization", "").removeprefix("Bearer "))
    log = secured.log()
    assert "bearer token required" in log
    for secret in SECRETS:
        assert secret not in log


def test_bearer_check_accepts_only_exact_tokens() -> None:
    bearer = Bearer(BearerAuth.model_validate({"bearer_token": "abc123"}))
    assert bearer.allows("Bearer abc123")
    assert bearer.allows("bearer  abc123 ")
    for header in (
        None,
        "",
        "abc123",
        "Basic abc123",
        "Bearer abc1234",
        "Bearer abc12",
        "Bearer",
        "Bearer ábc123",
    ):
        assert not bearer.allows(header)
