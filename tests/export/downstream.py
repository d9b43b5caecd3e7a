"""A downstream OTLP receiver for tests: what an operator's collector / Tempo would be.

gRPC (TraceService and LogsService) or HTTP (/v1/traces, /v1/logs, protobuf, gzip), in a
background thread, recording every request; it can be told to answer UNAVAILABLE / 503.
"""

from __future__ import annotations

import gzip
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span


class Downstream:
    def __init__(self, protocol: str = "grpc", port: int = 0, fail_first: int = 0) -> None:
        self.protocol = protocol
        self.traces: list[ExportTraceServiceRequest] = []
        self.logs: list[ExportLogsServiceRequest] = []
        self.attempts = 0
        self.fail_first = fail_first
        self.content_encodings: list[str] = []
        self._lock = threading.Lock()
        if protocol == "grpc":
            self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            handlers = {
                "opentelemetry.proto.collector.trace.v1.TraceService": ("Export", self._grpc_traces),
                "opentelemetry.proto.collector.logs.v1.LogsService": ("Export", self._grpc_logs),
            }
            for service, (method, fn) in handlers.items():
                request_type = ExportTraceServiceRequest if "trace" in service else ExportLogsServiceRequest
                self._grpc.add_generic_rpc_handlers(
                    (
                        grpc.method_handlers_generic_handler(
                            service,
                            {
                                method: grpc.unary_unary_rpc_method_handler(
                                    fn,
                                    request_deserializer=request_type.FromString,
                                    response_serializer=lambda m: m.SerializeToString(),
                                ),
                            },
                        ),
                    )
                )
            self.port = self._grpc.add_insecure_port(f"127.0.0.1:{port}")
            self._grpc.start()
        else:
            self._http = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
            self.port = self._http.server_address[1]
            threading.Thread(target=self._http.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _fail(self) -> bool:
        with self._lock:
            self.attempts += 1
            return self.attempts <= self.fail_first

    def _grpc_traces(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
        if self._fail():
            context.abort(grpc.StatusCode.UNAVAILABLE, "downstream warming up")
        with self._lock:
            self.traces.append(request)
        return ExportTraceServiceResponse()

    def _grpc_logs(self, request: ExportLogsServiceRequest, context: Any) -> ExportLogsServiceResponse:
        with self._lock:
            self.logs.append(request)
        return ExportLogsServiceResponse()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                encoding = self.headers.get("Content-Encoding", "")
                outer.content_encodings.append(encoding)
                if encoding == "gzip":
                    body = gzip.decompress(body)
                if outer._fail():
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                if self.path == "/v1/traces":
                    with outer._lock:
                        outer.traces.append(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/logs":
                    with outer._lock:
                        outer.logs.append(ExportLogsServiceRequest.FromString(body))
                    reply = ExportLogsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        return Handler

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """(resource attributes, span) for every span received."""
        from collector.otlp.views import value_of

        with self._lock:
            requests = list(self.traces)
        out = []
        for request in requests:
            for rs in request.resource_spans:
                resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    out.extend((resource, span) for span in ss.spans)
        return out

    def log_records(self) -> list[LogRecord]:
        with self._lock:
            requests = list(self.logs)
        return [
            r for req in requests for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records
        ]

    def wait_spans(self, count: int, timeout: float = 15.0) -> list[tuple[dict[str, Any], Span]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if len(spans) >= count:
                return spans
            time.sleep(0.05)
        raise TimeoutError(f"expected {count} spans, got {len(self.spans())}")

    def stop(self) -> None:
        if self.protocol == "grpc":
            self._grpc.stop(grace=None)
        else:
            self._http.shutdown()
            self._http.server_close()


def attrs(kvs: Any) -> dict[str, Any]:
    from collector.otlp.views import value_of

    return {kv.key: value_of(kv.value) for kv in kvs}
