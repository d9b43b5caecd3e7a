from __future__ import annotations

import base64
import json
import logging

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp import classes, wire
from collector.receiver import decode
from collector.receiver.errors import InvalidRequest, UnsupportedMedia
from collector.telemetry import RateLimitedLog


def test_hex_ids_survive_where_stock_json_format_would_corrupt_them() -> None:
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
        "parentSpanId": "eee19b7ec3c1b173", "name": "n", "kind": 3, "status": {"code": 2},
        "links": [{"traceId": "5b8efff798038103d269b633813fc60d", "spanId": "eee19b7ec3c1b175"}],
        "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": 1544712661000000000,
        "droppedFutureField": [1, 2, 3],
    }]}]}]}
    req = decode.decode("traces", json.dumps(body).encode(), "json")
    assert type(req) is classes.TraceRequest  # as the chain reads it
    span = req.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id.hex() == "5b8efff798038103d269b633813fc60c"
    assert span.span_id.hex() == "eee19b7ec3c1b174"
    assert span.parent_span_id.hex() == "eee19b7ec3c1b173"
    assert span.links[0].span_id.hex() == "eee19b7ec3c1b175"
    assert span.kind == 3 and span.status.code == 2
    assert span.end_time_unix_nano == 1544712661000000000


def test_log_record_ids_are_hex_too() -> None:
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "eventName": "x"}]}]}]}
    req = decode.decode("logs", json.dumps(body).encode(), "json")
    assert type(req) is classes.LogsRequest
    assert req.resource_logs[0].scope_logs[0].log_records[0].span_id.hex() == "eee19b7ec3c1b174"


def test_another_signals_lists_are_unknown_fields_not_a_crash() -> None:
    """A logs request holding ``resourceSpans`` (found by the fuzz tests) reads as an empty
    logs request, as stock OTLP/JSON parsing ignores unknown fields, not as a server error."""
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}], "resourceLogs": []}
    req = decode.decode("logs", json.dumps(body).encode(), "json")
    assert type(req) is classes.LogsRequest and len(req.resource_logs) == 0
    traces = decode.decode("traces", json.dumps({"resourceLogs": [{"scopeLogs": []}]}).encode(), "json")
    assert type(traces) is classes.TraceRequest and len(traces.resource_spans) == 0


def test_bad_hex_empties_the_id_instead_of_failing_the_request() -> None:
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "eee19b7ec3c1b174"}]}]}]}
    req = decode.decode("traces", json.dumps(body).encode(), "json")
    assert req.resource_spans[0].scope_spans[0].spans[0].trace_id == b""


def test_base64_ids_fail_the_request_with_a_hint_that_otlp_json_wants_hex() -> None:
    trace_id = bytes.fromhex("5b8efff798038103d269b633813fc60c")
    span = {"traceId": base64.b64encode(trace_id).decode(), "spanId": "eee19b7ec3c1b174"}
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with pytest.raises(InvalidRequest) as err:
        decode.decode("traces", json.dumps(body).encode(), "json")
    assert "traceId 'W47/95gDgQPSabYzgT/GDA==' is base64; OTLP/JSON writes trace and span ids as hex" in str(err.value)
    assert "'5b8efff798038103d269b633813fc60c'" in str(err.value)
    span = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": base64.b64encode(b"\x01" * 8).decode()}
    with pytest.raises(InvalidRequest, match=r"spanId 'AQEBAQEBAQE=' is base64.*16 hex digits"):
        decode.decode("traces", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode(), "json")


@pytest.mark.parametrize("body", [b"", b"null", b"[]", b"{", b'{"resourceSpans": 5}', "\u00e9".encode("latin-1")])
def test_json_garbage_is_invalid(body: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode.decode("traces", body, "json")


def test_media_types() -> None:
    assert decode.media_encoding("application/x-protobuf") == "protobuf"
    assert decode.media_encoding("application/json; charset=utf-8") == "json"
    with pytest.raises(UnsupportedMedia):
        decode.media_encoding("text/plain")


def _bad_text_request() -> tuple[ExportTraceServiceRequest, bytes]:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.attributes.add(key="count").value.int_value = 7
    nested = span.attributes.add(key="nested").value.kvlist_value.values.add(key="inner")
    nested.value.string_value = "BAD-TXT" + "x" * 200  # a length over one varint byte
    span.name = "BAD-TXT"
    return request, request.SerializeToString().replace(b"BAD-TXT", b"BAD\xe2\x80TX")


def test_text_that_is_not_utf8_is_read_with_replacement_characters(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    request, body = _bad_text_request()
    # The warning is written once a minute at most: not yet in this test, whatever ran before.
    monkeypatch.setattr(decode, "_warn_bad_text", RateLimitedLog(logging.getLogger("skillgauge"), logging.WARNING, 60.0))
    with caplog.at_level("WARNING"):
        parsed = decode.parse_protobuf(ExportTraceServiceRequest, body)
    span = parsed.resource_spans[0].scope_spans[0].spans[0]
    assert span.name == "BAD\ufffdTX"
    assert span.attributes[1].value.kvlist_value.values[0].value.string_value == "BAD\ufffdTX" + "x" * 200
    assert (span.attributes[0].value.int_value, span.trace_id) == (7, b"\x01" * 16)
    assert "not UTF-8" in caplog.text
    # Valid bytes are left exactly as they were; bytes that are no protobuf are still refused.
    assert wire.repaired(request.DESCRIPTOR, request.SerializeToString()) == request.SerializeToString()
    for broken in (body[:-3], b"\xff\xff\xff\xff garbage" + body):
        with pytest.raises(InvalidRequest):
            decode.parse_protobuf(ExportTraceServiceRequest, broken)


def test_json_text_that_is_not_utf8_or_a_lone_surrogate_is_read_with_replacement_characters() -> None:
    body = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "0af7651916cd43dd8448eb211c80319c",
                                    "spanId": "b7ad6b7169203331",
                                    "name": "BAD-TXT",
                                    "attributes": [
                                        {"key": "a", "value": {"stringValue": "lone \ud83d, pair \ud83d\ude00"}}
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()
    for raw, name in ((body, "BAD-TXT"), (body.replace(b"BAD-TXT", b"BAD\xe2\x80TX"), "BAD\ufffdTX")):
        span = decode.parse_json(ExportTraceServiceRequest, raw).resource_spans[0].scope_spans[0].spans[0]
        assert span.name == name
        assert span.attributes[0].value.string_value == "lone \ufffd, pair \U0001f600"
    with pytest.raises(InvalidRequest, match="not a valid OTLP/JSON"):  # other refusals stay
        decode.parse_json(ExportTraceServiceRequest, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"droppedAttributesCount": "many"}]}]}]}')


def test_values_nested_deeper_than_protobuf_reads_are_left_out_and_the_rest_is_read() -> None:
    # 60 nested arrays in one attribute: 120 messages deep, past protobuf's limit of 100.
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    deep = spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="deep")
    value = deep.attributes.add(key="nested").value
    for _ in range(60):
        value = value.array_value.values.add()
    value.string_value = "leaf"
    deep.attributes.add(key="after").value.string_value = "kept"
    spans.add(trace_id=b"\x01" * 16, span_id=b"\x03" * 8, name="plain")
    body = request.SerializeToString()
    with pytest.raises(Exception, match=r"[Dd]epth"):
        ExportTraceServiceRequest().ParseFromString(body)  # what protobuf says alone
    parsed = decode.parse_protobuf(ExportTraceServiceRequest, body)
    got = parsed.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in got] == ["deep", "plain"]
    assert got[0].attributes[1].value.string_value == "kept"
    depth, value = 0, got[0].attributes[0].value
    while value.HasField("array_value") and value.array_value.values:
        depth, value = depth + 1, value.array_value.values[0]
    assert 20 < depth < 60 and not value.HasField("string_value")  # cut where protobuf can read


def test_a_large_json_request_is_converted_in_slices_to_the_same_message() -> None:
    spans = [{"traceId": f"{n + 1:032x}", "spanId": f"{n + 1:016x}", "name": f"s{n}"} for n in range(5_000)]
    traces = {
        "resourceSpans": [
            {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},
             "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}, {"scope": {"name": "y"}, "spans": spans[:10]}]},
            {"scopeSpans": [{"spans": spans[:3]}]},
        ]
    }
    records = [{"body": {"stringValue": f"r{n}"}, "timeUnixNano": "1"} for n in range(4_500)]
    logs = {"resource_logs": [{"scope_logs": [{"scope": {"name": "z"}, "log_records": records}]}]}
    for message_type, data in ((ExportTraceServiceRequest, traces), (ExportLogsServiceRequest, logs)):
        text = json.dumps(data)
        steps = decode.parsing_json(message_type, text.encode())
        pauses = 0
        while True:
            try:
                next(steps)
                pauses += 1
            except StopIteration as done:
                sliced = done.value
                break
        assert pauses >= 3  # at least one pause per 2,000 items
        whole = message_type()
        fresh = json.loads(text)
        decode._hex_ids_to_base64(fresh)
        json_format.ParseDict(fresh, whole)
        assert sliced == whole
