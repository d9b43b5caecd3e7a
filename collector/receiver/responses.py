"""Successful Export answers, shared by the gRPC and HTTP receivers."""

from __future__ import annotations

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.otlp.received import Accepted
from collector.receiver.decode import Signal


def response_for(signal: Signal, result: Accepted) -> Message:
    """The Export response, with partial success when some items were rejected."""
    if signal == "traces":
        traces = ExportTraceServiceResponse()
        if result.rejected:
            traces.partial_success.rejected_spans = result.rejected
            traces.partial_success.error_message = result.message
        return traces
    logs = ExportLogsServiceResponse()
    if result.rejected:
        logs.partial_success.rejected_log_records = result.rejected
        logs.partial_success.error_message = result.message
    return logs
