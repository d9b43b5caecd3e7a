"""OTLP/gRPC answers, with the real SDK exporter and a raw channel for what it cannot send."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult
from support import FRAMEWORKS, Server, readable_spans, trace_requests, wait_for

from collector.receiver import grpc as grpc_receiver
from collector.receiver.config import Listener
from collector.receiver.decode import parse_json
from collector.testing import RecordingConsumer


def _stub(srv: Server) -> trace_service_pb2_grpc.TraceServiceStub:
    return trace_service_pb2_grpc.TraceServiceStub(grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}"))


def _request(*spans: tuple[str, bytes, bytes]) -> trace_service_pb2.ExportTraceServiceRequest:
    req = trace_service_pb2.ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    for session, trace_id, span_id in spans:
        s = scope.spans.add(trace_id=trace_id, span_id=span_id, name="chat")
        s.attributes.add(key="session.id").value.string_value = session
    return req


T1 = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def test_sdk_grpc_exporter_with_gzip(server: Server) -> None:
    (req,) = trace_requests(FRAMEWORKS / "strands" / "missing_skill.traces.jsonl")
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True,
                                compression=grpc.Compression.Gzip)
    assert exporter.export(readable_spans(req)) == SpanExportResult.SUCCESS
    body = wait_for(lambda: server.get_json("/v1/sessions/strands-missing_skill-0001")[1].get("revisions"))
    loads = body[0]["records"][-1]["coverage"]["skill_loads"]
    assert [(x["skill"], x["status"]) for x in loads] == [("relese-notes", "failed")]


def test_partial_success_names_rejected_spans(server: Server) -> None:
    reply = _stub(server).Export(_request(("a", T1, b"\x01" * 8), ("a", T1, b"short"), ("a", b"", b"\x02" * 8)))
    assert reply.partial_success.rejected_spans == 2
    assert "invalid" in reply.partial_success.error_message
    assert server.get_json("/v1/sessions/a")[1]["open"]["spans"] == 1


def test_garbage_is_invalid_argument(server: Server) -> None:
    raw = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}").unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\xff\xff\xff\xffnot protobuf")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_oversized_is_resource_exhausted_without_retry_info(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"grpc": {"max_request_bytes": "32KiB"}}}})
    try:
        big = _request(*[("big", T1, (i + 1).to_bytes(8, "big")) for i in range(10)])
        for s in big.resource_spans[0].scope_spans[0].spans:
            s.attributes.add(key="pad").value.string_value = "x" * 4000
        with pytest.raises(grpc.RpcError) as err:
            _stub(srv).Export(big)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "google.rpc.retryinfo-bin" not in dict(err.value.trailing_metadata() or ())
    finally:
        srv.stop()


def test_backpressure_is_unavailable_with_retry_info(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"sessions": {"max_open": 1, "idle_timeout": "1h"}})
    try:
        _stub(srv).Export(_request(("one", T1, b"\x01" * 8)))
        # Acknowledged, then assembled: the status API answers once "one" is open.
        assert srv.get_json("/v1/sessions/one")[0] == 200
        with pytest.raises(grpc.RpcError) as err:
            _stub(srv).Export(_request(("two", bytes.fromhex("1bf7651916cd43dd8448eb211c80319d"), b"\x02" * 8)))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(err.value.trailing_metadata() or ())
        info = error_details_pb2.RetryInfo()
        info.ParseFromString(trailers["google.rpc.retryinfo-bin"])
        assert info.retry_delay.seconds >= 1
        assert "grpc-status-details-bin" in trailers
    finally:
        srv.stop()


def test_logs_correlate_by_session_and_reject_orphans(server: Server) -> None:
    lines = (FRAMEWORKS / "claude_code" / "right_skill.logs.jsonl").read_text().splitlines()
    logs = parse_json(logs_service_pb2.ExportLogsServiceRequest, lines[0].encode())
    records = logs.resource_logs[0].scope_logs[0].log_records
    session_id = next(kv.value.string_value for kv in records[0].attributes if kv.key == "session.id")
    orphan = logs.resource_logs[0].scope_logs[0].log_records.add()
    orphan.body.string_value = "no session, no trace"
    stub = logs_service_pb2_grpc.LogsServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    reply = stub.Export(logs)
    assert reply.partial_success.rejected_log_records == 1
    assert "no session key" in reply.partial_success.error_message
    assert server.get_json(f"/v1/sessions/{session_id}")[0] == 200


async def test_a_second_grpc_receiver_cannot_share_the_port() -> None:
    intake = RecordingConsumer()
    first, port = await grpc_receiver.start(Listener(endpoint="127.0.0.1:0"), intake, lambda *_: None)
    try:
        with pytest.raises(OSError, match=f"cannot listen on .*another process listens on port {port}: stop it, or choose another port"):
            second, _ = await grpc_receiver.start(Listener(endpoint=f"127.0.0.1:{port}"), intake, lambda *_: None)
            await second.stop(None)  # only reached when the port was shared
    finally:
        await first.stop(None)


def _with_bad_text(*spans: tuple[str, bytes, bytes]) -> bytes:
    """A request whose first span has an attribute holding bytes that are not UTF-8 (as a tool
    output cut in the middle of a character would): protobuf refuses such a string."""
    req = _request(*spans)
    req.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="tool.output").value.string_value = "BAD-TXT"
    return req.SerializeToString().replace(b"BAD-TXT", b"BAD\xe2\x80TX")  # a character cut short


def test_text_that_is_not_utf8_costs_no_span(server: Server) -> None:
    body = _with_bad_text(("u8", T1, b"\x01" * 8), ("u8", T1, b"\x02" * 8))
    with pytest.raises(Exception, match="UTF-8"):
        trace_service_pb2.ExportTraceServiceRequest().ParseFromString(body)  # what protobuf says alone
    raw = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}").unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=lambda b: b, response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString)
    reply = raw(body)
    assert reply.partial_success.rejected_spans == 0
    assert server.get_json("/v1/sessions/u8")[1]["open"]["spans"] == 2
