"""Redacted attribute values never reach the judge's prompts, the exported evaluation spans
or the status API; the redactor itself on every place an attribute can hide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from downstream import Downstream
from fake_anthropic import FakeAnthropic
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, readable_spans, trace_requests, wait_for

from collector.config import ConfigError, parse
from collector.otlp import classes
from collector.receiver.config import Redact
from collector.receiver.redact import REDACTED, Redactor

EMAIL = "alice.liddell@example.com"
CUSTOMER = "Zebulon Quagmire-Smith"
SESSION = "strands-right_skill-0001"


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _request_with_personal_data() -> ExportTraceServiceRequest:
    (request,) = trace_requests(FRAMEWORKS / "strands" / "right_skill.traces.jsonl")
    body = json_format.MessageToDict(request)
    resource_spans = body["resourceSpans"][0]
    resource_spans["resource"]["attributes"].append(_kv("user.email", EMAIL))
    for span in resource_spans["scopeSpans"][0]["spans"]:
        if span["name"].startswith("invoke_agent"):
            span["attributes"].append(_kv("app.customer.name", CUSTOMER))
        for event in span.get("events", []):
            for attr in event.get("attributes", []):
                if event["name"] == "gen_ai.user.message" and attr["key"] == "content":
                    # The same values, copied into what the user said: scrubbed too.
                    text = attr["value"]["stringValue"]
                    attr["value"]["stringValue"] = text.replace(
                        "Write release notes", f"I am {CUSTOMER} ({EMAIL}). Write release notes"
                    )
    return json_format.ParseDict(body, ExportTraceServiceRequest())


def test_redacted_values_reach_neither_the_judge_nor_exported_spans(
    tmp_path: Path, fake_judge: FakeAnthropic
) -> None:
    downstream = Downstream("grpc")
    srv = Server(
        tmp_path,
        {
            "judge": {"base_url": fake_judge.base_url, "api_key": "test-key"},
            "redact": {"attributes": ["user.email", "app.customer.*"]},
            "export": {"otlp": {"endpoint": downstream.endpoint, "retry": {"initial_interval": "0.1s"}}},
        },
    )
    try:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{srv.grpc_port}", insecure=True)
        assert exporter.export(readable_spans(_request_with_personal_data())) == SpanExportResult.SUCCESS

        def evaluated() -> list[dict[str, Any]] | None:
            code, body = srv.get_json(f"/v1/sessions/{SESSION}")
            return body["revisions"][-1]["records"] if code == 200 and "revisions" in body else None

        records = wait_for(evaluated, timeout=20)
        exported = downstream.wait_spans(len(records))
        prompts = [json.dumps(seen.body) for seen in fake_judge.requests]
        assert prompts, "the session should have been judged"
        assert any(REDACTED in p and "release notes" in p for p in prompts)  # the user turn, scrubbed
        status_view = json.dumps(srv.get_json(f"/v1/sessions/{SESSION}")[1])
        for secret in (EMAIL, CUSTOMER):
            assert not any(secret in p for p in prompts)
            assert all(secret.encode() not in span.SerializeToString() for _, span in exported)
            assert secret not in status_view
    finally:
        srv.stop()
        downstream.stop()


@pytest.mark.parametrize("parsed", ["otlp", "chain"])
def test_redactor_covers_resource_scope_span_event_link_log_and_nested_attributes(parsed: str) -> None:
    """As OTLP's classes hold a request (a list of attributes) and as the chain parses it (a
    map, ``collector.otlp.classes``)."""
    convert = classes.received if parsed == "chain" else (lambda message: message)
    traces = json_format.ParseDict(
        {
            "resourceSpans": [{
                "resource": {"attributes": [_kv("user.email", EMAIL), _kv("service.name", "agent")]},
                "scopeSpans": [{
                    "scope": {"name": "s", "attributes": [_kv("user.id", "u-123456")]},
                    "spans": [{
                        "name": f"chat for {EMAIL}",
                        "attributes": [
                            {"key": "meta", "value": {"kvlistValue": {"values": [_kv("user.email", "b@c.de")]}}},
                            {"key": "user.tags", "value": {"arrayValue": {"values": [{"stringValue": "vip-tag"}]}}},
                        ],
                        "events": [{"name": "e", "attributes": [_kv("content", f"mail {EMAIL}, tag vip-tag, id u-123456")]}],
                        "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
                                   "attributes": [_kv("user.email", EMAIL)]}],
                    }],
                }],
            }]
        },
        ExportTraceServiceRequest(),
    )  # fmt: skip
    traces = convert(traces)
    assert Redactor(Redact(attributes=("user.*",)))(traces) == 5
    text = json_format.MessageToJson(traces)
    for secret in (EMAIL, "b@c.de", "u-123456", "vip-tag"):
        assert secret not in text
    assert '"agent"' in text and "chat for [REDACTED]" in text and "mail [REDACTED], tag [REDACTED]" in text

    logs = json_format.ParseDict(
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{
            "body": {"stringValue": f"user_prompt from {EMAIL}"},
            "attributes": [_kv("user.email", EMAIL), _kv("session.id", "s1")],
        }]}]}]},
        ExportLogsServiceRequest(),
    )  # fmt: skip
    logs = convert(logs)
    assert Redactor(Redact(attributes=("user.email",)))(logs) == 1
    record = LogRecord.FromString(logs.resource_logs[0].scope_logs[0].log_records[0].SerializeToString())
    assert record.body.string_value == f"user_prompt from {REDACTED}"
    assert {kv.key: kv.value.string_value for kv in record.attributes} == {
        "user.email": REDACTED,
        "session.id": "s1",
    }


def test_short_values_are_redacted_but_not_scrubbed_from_other_text() -> None:
    request = json_format.ParseDict(
        {"resourceSpans": [{"resource": {"attributes": [_kv("tier", "eu")]},
                            "scopeSpans": [{"spans": [{"name": "europe"}]}]}]},
        ExportTraceServiceRequest(),
    )  # fmt: skip
    Redactor(Redact(attributes=("tier",)))(request)
    assert request.resource_spans[0].scope_spans[0].spans[0].name == "europe"
    assert request.resource_spans[0].resource.attributes[0].value.string_value == REDACTED


def test_session_keys_cannot_be_redacted() -> None:
    for key in ("session.id", "session.*", "skillgauge.session.end"):
        try:
            parse({"redact": {"attributes": [key]}})
        except ConfigError as err:
            assert "cannot be redacted" in str(err)
        else:
            raise AssertionError(f"{key} was accepted")
