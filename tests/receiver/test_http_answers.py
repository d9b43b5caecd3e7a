"""OTLP/HTTP answers for every kind of input, sent to a running ``skillgauge serve``."""

from __future__ import annotations

import gzip
import json
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import Parse
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, metric_value, readable_spans, trace_requests, wait_for
from test_codings import ENCODERS

from collector.receiver.decode import parse_json


def span(session: str, trace: str, span_id: str, name: str = "chat", **extra: Any) -> dict[str, Any]:
    return {
        "traceId": trace, "spanId": span_id, "name": name, "kind": 1,
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000000100000000,
        "attributes": [{"key": "session.id", "value": {"stringValue": session}}],
        "someFieldFromTheFuture": {"x": 1}, **extra,
    }


def request(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}).encode()


def post(srv: Server, body: bytes, content_type: str = "application/json", path: str = "/v1/traces",
         **headers: str) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(f"{srv.http_url}{path}", body, {"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


T1, T2 = "0af7651916cd43dd8448eb211c80319c", "1bf7651916cd43dd8448eb211c80319d"


def test_json_with_hex_ids_and_unknown_fields_is_accepted_exactly(server: Server) -> None:
    code, _, body = post(server, request(span("s1", T1, "b7ad6b7169203331"), span("s1", T1, "c7ad6b7169203332")))
    assert (code, json.loads(body)) == (200, {})
    status, view = server.get_json("/v1/sessions/s1")
    assert status == 200 and view["open"]["spans"] == 2


def test_bad_spans_are_rejected_alone_with_partial_success(server: Server) -> None:
    post(server, request(span("other", T2, "d7ad6b7169203333")))
    code, _, body = post(server, request(
        span("s1", T1, "b7ad6b7169203331"),
        span("s1", "not-hex", "c7ad6b7169203332"),
        span("s1", T1, "0000000000000000"),
        span("s1", T1, "e7ad6b7169203334"),
    ))
    assert code == 200
    partial = json.loads(body)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 2
    assert "trace_id" in partial["errorMessage"] and "span_id" in partial["errorMessage"]
    assert server.get_json("/v1/sessions/s1")[1]["open"]["spans"] == 2
    assert server.get_json("/v1/sessions/other")[1]["open"]["spans"] == 1
    assert metric_value(server.metrics(), "skillgauge_rejected_items_total", signal="traces") == 2


@pytest.mark.parametrize(
    ("content_type", "body", "code"),
    [
        ("application/json", b"{not json", 400),
        ("application/json", b"[1, 2]", 400),
        ("application/json", b'{"resourceSpans": "nope"}', 400),
        ("application/x-protobuf", b"\xff\xff\xff\xff garbage", 400),
        ("application/json", b'{"resourceSpans": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400),  # nests too deep
        ("text/plain", b"hello", 415),
    ],
)
def test_garbage_gets_a_status_body_and_changes_nothing(server: Server, content_type: str, body: bytes, code: int) -> None:
    post(server, request(span("kept", T1, "b7ad6b7169203331")))
    got, headers, reply = post(server, body, content_type)
    assert got == code
    status = status_pb2.Status()
    if headers["Content-Type"].startswith("application/json"):
        Parse(reply, status)
    else:
        status.ParseFromString(reply)
    assert status.code == 3  # INVALID_ARGUMENT
    assert status.message
    assert server.get_json("/v1/sessions/kept")[1]["open"]["spans"] == 1


def test_base64_ids_get_400_saying_otlp_json_wants_hex(server: Server) -> None:
    code, _, reply = post(server, request(span("b64", "CvdlGRbNQ92ESOshHIAxnA==", "t61rcWkgMzE=")))
    status = status_pb2.Status()
    Parse(reply, status)
    assert code == 400 and "OTLP/JSON writes trace and span ids as hex" in status.message
    assert "'0af7651916cd43dd8448eb211c80319c'" in status.message
    assert server.get_json("/v1/sessions/b64")[0] == 404


def test_unsupported_content_encoding_is_400(server: Server) -> None:
    code, _, _ = post(server, request(span("s", T1, "b7ad6b7169203331")), **{"Content-Encoding": "br"})
    assert code == 400


def test_every_coding_the_collectors_exporters_send_is_taken_and_a_bomb_in_each_is_413(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_request_bytes": "64KiB"}}}})
    try:
        for coding, encode in ENCODERS.items():
            body = encode(_protobuf(f"coded-{coding}", T1, "b7ad6b7169203331"))
            code, _, _ = post(srv, body, "application/x-protobuf", **{"Content-Encoding": coding})
            assert code == 200, coding
            assert srv.get_json(f"/v1/sessions/coded-{coding}")[1]["open"]["spans"] == 1
            code, headers, _ = post(srv, encode(b"\0" * (1024 * 1024)), "application/x-protobuf",
                                    **{"Content-Encoding": coding})
            assert code == 413 and "Retry-After" not in headers, coding
            code, _, reply = post(srv, body[:-4], "application/x-protobuf", **{"Content-Encoding": coding.upper()})
            assert code == 400 and coding.encode() in reply, coding
    finally:
        srv.stop()


def test_oversized_and_zip_bomb_requests_get_413_without_retry_after(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_request_bytes": "64KiB"}}}})
    try:
        big = request(*[span("s", T1, f"{i + 1:016x}", attributes_pad="x" * 200) for i in range(400)])
        assert len(big) > 64 * 1024
        code, headers, _ = post(srv, big)
        assert code == 413 and "Retry-After" not in headers
        bomb = gzip.compress(b"\0" * (10 * 1024 * 1024))
        code, headers, _ = post(srv, bomb, "application/x-protobuf", **{"Content-Encoding": "gzip"})
        assert code == 413 and "Retry-After" not in headers
        small = gzip.compress(request(span("zipped", T1, "b7ad6b7169203331")))
        code, _, _ = post(srv, small, **{"Content-Encoding": "gzip"})
        assert code == 200
        assert srv.get_json("/v1/sessions/zipped")[1]["open"]["spans"] == 1
    finally:
        srv.stop()


def _chunked(srv: Server, body: bytes, piece: int = 4096) -> int:
    """POST ``body`` with Transfer-Encoding: chunked, as the OpenTelemetry JS exporters send
    (no Content-Length); the answer's status."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
    try:
        conn.request(
            "POST", "/v1/traces", (body[i : i + piece] for i in range(0, len(body), piece)),
            {"Content-Type": "application/x-protobuf"}, encode_chunked=True,
        )
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_a_chunked_body_is_taken_and_bounded_like_any_other(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"max_request_bytes": "64KiB"}}}})
    try:
        assert _chunked(srv, _protobuf("chunked", T1, "b7ad6b7169203331")) == 200
        assert srv.get_json("/v1/sessions/chunked")[1]["open"]["spans"] == 1
        pad = {"key": "pad", "value": {"stringValue": "x" * 200}}
        many = [span("too-big", T2, f"{i + 1:016x}") for i in range(400)]
        for one in many:
            one["attributes"].append(pad)
        big = bytes(parse_json(ExportTraceServiceRequest, request(*many)).SerializeToString())
        assert len(big) > 64 * 1024
        assert _chunked(srv, big) == 413  # no Content-Length to refuse early: counted as it streams
        assert srv.get_json("/v1/sessions/too-big")[0] == 404
    finally:
        srv.stop()


def test_backpressure_is_503_with_retry_after_and_retry_info(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"sessions": {"max_open": 1, "idle_timeout": "1h"}})
    try:
        assert post(srv, request(span("first", T1, "b7ad6b7169203331")))[0] == 200
        # Acknowledged, then assembled: the status API answers once "first" is open.
        assert srv.get_json("/v1/sessions/first")[0] == 200
        code, headers, body = post(srv, request(span("second", T2, "c7ad6b7169203332")))
        assert code == 503
        assert int(headers["Retry-After"]) >= 1
        status = status_pb2.Status()
        Parse(body, status)
        info = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(info) and info.retry_delay.seconds >= 1
        assert srv.get_json("/v1/sessions/second")[0] == 404
        assert metric_value(srv.metrics(), "skillgauge_rejected_requests_total", protocol="http",
                            signal="traces", reason="backpressure") == 1
    finally:
        srv.stop()


def test_empty_request_succeeds(server: Server) -> None:
    assert post(server, b"{}")[0] == 200
    assert post(server, b"", "application/x-protobuf")[0] == 200


def test_sdk_http_exporter_with_gzip_and_protobuf_answer(server: Server) -> None:
    (req,) = trace_requests(FRAMEWORKS / "strands" / "file_read.traces.jsonl")
    exporter = OTLPSpanExporter(endpoint=f"{server.http_url}/v1/traces", compression=Compression.Gzip)
    assert exporter.export(readable_spans(req)) == SpanExportResult.SUCCESS
    assert wait_for(lambda: server.get_json("/v1/sessions/strands-file_read-0001")[0] == 200)
    code, headers, body = post(server, b"", "application/x-protobuf")
    assert code == 200 and headers["Content-Type"] == "application/x-protobuf"
    reply = ExportTraceServiceResponse()
    reply.ParseFromString(body)
    assert not reply.HasField("partial_success")


def test_sdk_http_exporter_with_deflate(server: Server) -> None:
    (req,) = trace_requests(FRAMEWORKS / "strands" / "file_read.traces.jsonl")
    exporter = OTLPSpanExporter(endpoint=f"{server.http_url}/v1/traces", compression=Compression.Deflate)
    assert exporter.export(readable_spans(req)) == SpanExportResult.SUCCESS
    spans = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    assert wait_for(lambda: server.get_json("/v1/sessions/strands-file_read-0001")[1].get("open", {}).get("spans") == spans)


def test_opencodes_own_json_requests_are_taken_as_sent(server: Server) -> None:
    # OpenCode's bundled exporter writes OTLP/HTTP JSON (numbers for 64-bit integers, hex
    # ids, log bodies that are arrays): its recorded request bodies, byte for byte.
    folder = FRAMEWORKS / "opencode"
    session = json.loads((folder / "expected.json").read_text())["scenarios"]["right_skill"]["session_id"]
    for signal in ("traces", "logs"):
        for line in (folder / f"right_skill.{signal}.jsonl").read_text().splitlines():
            code, _, body = post(server, line.encode(), path=f"/v1/{signal}")
            assert (code, json.loads(body)) == (200, {}), body
    # The session's spans: those of the trace its AI SDK spans carry the session id in (the
    # other traces are OpenCode's own housekeeping, with no session, discarded when closed).
    spans = [s for req in trace_requests(folder / "right_skill.traces.jsonl")
             for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    traces = {s.trace_id for s in spans if any(kv.key == "session.id" for kv in s.attributes)}

    def coverage() -> dict[str, Any]:
        revisions = server.get_json(f"/v1/sessions/{session}")[1].get("revisions", [])
        return next((r["coverage"] for rev in revisions for r in rev["records"] if "coverage" in r), {})

    closed = wait_for(coverage)  # closed after the test server's 1 s idle timeout
    assert closed["spans"] == sum(s.trace_id in traces for s in spans) < len(spans)
    assert closed["framework"] == "opencode"
    assert [(x["skill"], x["status"]) for x in closed["skill_loads"]] == [("release-notes", "loaded")]


def test_every_gzip_member_is_decoded(server: Server) -> None:
    body = gzip.compress(b"")  # an empty first member
    body += gzip.compress(_protobuf("gz", T1, "b7ad6b7169203331"))
    body += gzip.compress(_protobuf("gz", T1, "c7ad6b7169203332"))
    code, _, _ = post(server, body, "application/x-protobuf", **{"Content-Encoding": "gzip"})
    assert code == 200
    assert server.get_json("/v1/sessions/gz")[1]["open"]["spans"] == 2  # not only the first member's


def test_gzip_with_trailing_garbage_is_400_and_keeps_nothing(server: Server) -> None:
    body = gzip.compress(_protobuf("gz2", T1, "b7ad6b7169203331")) + b"not a gzip member"
    code, _, reply = post(server, body, "application/x-protobuf", **{"Content-Encoding": "gzip"})
    assert code == 400 and b"gzip" in reply
    assert server.get_json("/v1/sessions/gz2")[0] == 404


def _protobuf(session: str, trace: str, span_id: str) -> bytes:
    return bytes(parse_json(ExportTraceServiceRequest, request(span(session, trace, span_id))).SerializeToString())


def _raw(srv: Server, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.http_port))
    sock.sendall(data)
    return sock


HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n"


def test_a_client_gone_mid_body_is_one_log_line_without_traceback(server: Server) -> None:
    sock = _raw(server, HEAD + b"0123456789")
    time.sleep(0.3)
    sock.close()
    line = wait_for(lambda: next((x for x in server.log().splitlines() if "disconnected" in x), None), timeout=5)
    assert "OTLP/HTTP /v1/traces: client 127.0.0.1 disconnected" in line
    assert "Traceback" not in server.log()
    assert metric_value(server.metrics(), "skillgauge_rejected_requests_total", reason="client_disconnected") == 1


def test_slow_headers_and_a_slow_body_are_dropped_after_read_timeout(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"http": {"read_timeout": "1s"}}}})
    try:
        headers = _raw(srv, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # never ends its headers
        body = _raw(srv, HEAD + b"0123")  # never ends its body
        # aiohttp alone would wait an hour for headers (keepalive_timeout 3630 s): a close within
        # the socket's 15 s is read_timeout's (a recv that outlasts them raises instead), and the
        # 408 names it.
        for sock in (headers, body):
            sock.settimeout(15)
        assert headers.recv(100) == b""  # closed
        answer = body.recv(1000)
        assert answer.startswith(b"HTTP/1.1 408") and b"not received within 1s" in answer
        headers.close()
        body.close()
    finally:
        srv.stop()


def test_protobuf_text_that_is_not_utf8_costs_no_span(server: Server) -> None:
    req = ExportTraceServiceRequest()
    req.ParseFromString(_protobuf("u8http", T1, "b7ad6b7169203331"))
    spans = req.resource_spans[0].scope_spans[0].spans
    spans.add().CopyFrom(spans[0])
    spans[1].span_id = bytes.fromhex("c7ad6b7169203332")
    spans[0].attributes.add(key="tool.output").value.string_value = "BAD-TXT"
    bad = req.SerializeToString().replace(b"BAD-TXT", b"BAD\xe2\x80TX")  # a character cut short
    code, _, reply = post(server, bad, "application/x-protobuf")
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(reply)
    assert code == 200 and answer.partial_success.rejected_spans == 0
    assert server.get_json("/v1/sessions/u8http")[1]["open"]["spans"] == 2


def test_json_text_cut_in_a_character_costs_no_span(server: Server) -> None:
    # JavaScript's JSON.stringify writes a string cut between the two halves of an emoji with
    # its lone half escaped ("\ud83d"); protobuf refuses such a string with its request.
    cut = span("u8json", T1, "b7ad6b7169203331")
    cut["attributes"].append({"key": "tool.output", "value": {"stringValue": "done \ud83d"}})
    body = request(cut, span("u8json", T1, "c7ad6b7169203332"))
    assert b"\\ud83d" in body
    code, _, reply = post(server, body)
    assert (code, json.loads(reply)) == (200, {})
    assert server.get_json("/v1/sessions/u8json")[1]["open"]["spans"] == 2
