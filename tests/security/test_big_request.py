"""A request of a million tiny spans is checked in slices, the event loop running in
between: a small request sent while the big one is being checked is answered first, and
the status API answers meanwhile."""

from __future__ import annotations

import http.client
import threading
import urllib.request
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support import Server

SPANS = 1_000_000


def _spans(count: int, first: int = 1) -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for n in range(first, first + count):
        spans.add(trace_id=(n % 1000 + 1).to_bytes(16, "big"), span_id=n.to_bytes(8, "big"))
    return request.SerializeToString()


class _Export(threading.Thread):
    """One OTLP/HTTP export on a connection of its own; ``answered`` lists the names of the
    exports in the order their answers arrived."""

    def __init__(self, srv: Server, name: str, body: bytes, answered: list[tuple[str, int]]) -> None:
        super().__init__()
        self.connection = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=600)
        self.connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        self.answered = answered
        self.name = name

    def run(self) -> None:
        response = self.connection.getresponse()
        response.read()
        self.answered.append((self.name, response.status))
        self.connection.close()


def test_a_small_request_is_answered_while_a_million_span_request_is_checked(tmp_path: Path) -> None:
    big, small = _spans(SPANS), _spans(1, first=SPANS + 1)
    # Room for every span's session: the request is only checked span by span, not capped.
    config = {
        "receivers": {"otlp": {"http": {"max_request_bytes": 64 * 2**20}}},
        "sessions": {"max_open": 2 * SPANS},
    }
    srv = Server(tmp_path, config)
    answered: list[tuple[str, int]] = []
    try:
        first = _Export(srv, "big", big, answered)  # sent whole before the small one starts
        first.start()
        with urllib.request.urlopen(f"{srv.status_url}/healthz", timeout=60) as resp:
            assert resp.status == 200
        second = _Export(srv, "small", small, answered)
        second.start()
        for export in (first, second):
            export.join()
        assert answered == [("small", 200), ("big", 200)]
    finally:
        srv.stop()
