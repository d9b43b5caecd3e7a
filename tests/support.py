"""Test helpers: recorded OTLP files as requests or as SDK spans, and a running server."""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from collector.config import parse
from collector.otlp import classes
from collector.otlp.views import value_of
from collector.receiver.decode import parse_json
from collector.receiver.errors import ReceiveError
from collector.replay import requests_in
from collector.sessions.assembler import Assembler
from evaluators.evidence import Session

FIXTURES = Path(__file__).parent / "fixtures"
EXPORT_TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
FRAMEWORKS = FIXTURES / "frameworks"


def pb_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, for encodings no SDK here writes."""
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload


def pb_varint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def detectable(scenario: dict[str, Any]) -> dict[str, Any]:
    """What detection is held to for a recorded scenario: its ground truth, except where the
    scenario names a ``known_gap`` (what the recording holds that no rule reads yet, and what
    detection reports instead): then the gap's ``detected`` fields.  The truth itself stays in
    the file; ``tests/detect/test_recordings.py`` checks that each gap still differs from it."""
    gap = scenario.get("known_gap")
    return {**scenario, **gap["detected"]} if gap else scenario


def trace_requests(path: Path) -> list[ExportTraceServiceRequest]:
    return [parse_json(ExportTraceServiceRequest, line.encode()) for line in path.read_text().splitlines() if line.strip()]


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


def readable_spans(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """Recorded spans as SDK spans, so the real SDK exporters can send them again."""
    spans = []
    for rs in request.resource_spans:
        resource = Resource(_attrs(rs.resource.attributes))
        for ss in rs.scope_spans:
            scope = InstrumentationScope(ss.scope.name, ss.scope.version or None)
            for s in ss.spans:
                ctx = SpanContext(int.from_bytes(s.trace_id, "big"), int.from_bytes(s.span_id, "big"),
                                  is_remote=False, trace_flags=TraceFlags(1))
                parent = (SpanContext(int.from_bytes(s.trace_id, "big"), int.from_bytes(s.parent_span_id, "big"),
                                      is_remote=False, trace_flags=TraceFlags(1)) if s.parent_span_id else None)
                spans.append(ReadableSpan(
                    name=s.name, context=ctx, parent=parent, resource=resource,
                    attributes=_attrs(s.attributes),
                    events=[Event(e.name, _attrs(e.attributes), e.time_unix_nano) for e in s.events],
                    kind=SpanKind(max(s.kind - 1, 0)),
                    status=Status(StatusCode(s.status.code), s.status.message or None),
                    start_time=s.start_time_unix_nano, end_time=s.end_time_unix_nano,
                    instrumentation_scope=scope,
                ))
    return spans


def _deep_merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def reserved_port() -> socket.socket:
    """A loopback port held by a bound socket that does not listen (connections to it are
    refused) and that a server binding with SO_REUSEPORT, as gRPC servers do, can share:
    no other process can take it in the meantime.  Close the socket when done."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


# serve's startup line (INFO): "... listening: OTLP/gRPC 127.0.0.1:PORT (...) | OTLP/HTTP ... | status ..."
_LISTENING = re.compile(r"listening: (.*)")
_BOUND = {"grpc": re.compile(r"OTLP/gRPC \S+:(\d+) "), "http": re.compile(r"OTLP/HTTP \S+:(\d+) "),
          "status": re.compile(r"status \S+:(\d+) ")}


class Server:
    """``skillgauge serve`` in a subprocess.  Every listener binds port 0 on loopback and the
    ports are read back from serve's startup line, so no other process can take one.

    ``env`` adds environment variables (for ``${env:VAR}`` in the config); ``status_token``
    is sent to /metrics and /v1/sessions; ``status_ssl`` is the client context for a status
    API with ``tls`` (https); ``wait=False`` returns before serve is ready (call
    ``wait_ready``, which learns the ports, before using them); ``open_files`` runs serve
    under ``ulimit -n open_files`` (soft and hard)."""

    def __init__(
        self,
        tmp: Path,
        extra: dict[str, Any] | None = None,
        *,
        env: dict[str, str] | None = None,
        status_token: str | None = None,
        status_ssl: ssl.SSLContext | None = None,
        wait: bool = True,
        open_files: int | None = None,
    ) -> None:
        self.status_token = status_token
        self.status_ssl = status_ssl
        self.grpc_port = self.http_port = self.status_port = 0  # known once serve has logged them
        config: dict[str, Any] = {
            "receivers": {"otlp": {
                "grpc": {"endpoint": f"127.0.0.1:{self.grpc_port}"},
                "http": {"endpoint": f"127.0.0.1:{self.http_port}"},
            }},
            "status": {"endpoint": f"127.0.0.1:{self.status_port}"},
            "storage": {"path": str(tmp / "data")},
            "sessions": {"idle_timeout": "1s", "check_interval": "0.1s"},
        }
        _deep_merge(config, extra or {})
        self.config_path = tmp / "skillgauge.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = tmp / "serve.log"
        self._log = self.log_path.open("wb")
        self.status_tls = "tls" in config["status"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}, **(env or {})}
        command = [sys.executable, "-m", "collector", "serve", "--config", str(self.config_path)]
        if open_files is not None:
            # Through the shell, not ``preexec_fn``: Python code run in a forked child of this
            # process (which holds gRPC clients) can meet gRPC's restarted poller and die before
            # exec ("epoll_wait error: Bad file descriptor", grpc/grpc#43055).
            command = ["/bin/sh", "-c", f'ulimit -n {int(open_files)} && exec "$0" "$@"', *command]
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()

    @property
    def status_url(self) -> str:
        return f"{'https' if self.status_tls else 'http'}://127.0.0.1:{self.status_port}"

    def _open(self, path: str, timeout: float) -> Any:
        headers = {"Authorization": f"Bearer {self.status_token}"} if self.status_token else {}
        request = urllib.request.Request(f"{self.status_url}{path}", headers=headers)
        return urllib.request.urlopen(request, timeout=timeout, context=self.status_ssl)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def _read_bound_ports(self) -> bool:
        """The ports from serve's startup line, once it is logged (after serve is ready)."""
        line = _LISTENING.search(self.log())
        if line is None:
            return False
        for name, pattern in _BOUND.items():
            found = pattern.search(line.group(1))
            if found:
                setattr(self, f"{name}_port", int(found.group(1)))
        return True

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"skillgauge serve exited: {self.log()}")
            if not self.status_port and not self._read_bound_ports():
                time.sleep(0.1)
                continue
            try:
                with self._open("/readyz", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"not ready after {timeout}s: {self.log()}")

    def get_json(self, path: str) -> tuple[int, Any]:
        try:
            with self._open(path, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def metrics(self) -> str:
        with self._open("/metrics", timeout=5) as resp:
            return resp.read().decode()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def export_grpc(server: Server, body: bytes) -> None:
    """Send an encoded ExportTraceServiceRequest to ``server`` over gRPC as it is, on a
    channel of its own; a refusal raises ``grpc.RpcError``."""
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    try:
        channel.unary_unary(EXPORT_TRACES, request_serializer=lambda b: b, response_deserializer=lambda b: b)(
            body, timeout=10
        )
    finally:
        channel.close()


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(interval)


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0.0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        series = head[len(name):]
        if series and not series.startswith("{"):
            continue
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(value)
    return 0.0


def iter_json_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def outside_address() -> str:
    """An IPv4 address of this host that is not loopback (the one its default route would
    use): a connection from it is not local.  The tests of the loopback-only guard need
    one; a host without any fails them with this message rather than skipping them."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            address = str(probe.getsockname()[0])
        except OSError as err:
            raise AssertionError(f"this test needs a non-loopback IPv4 address on the host: {err}") from err
    assert not address.startswith("127."), f"this test needs a non-loopback IPv4 address, not {address}"
    return address


def recorded_trace_requests() -> list[tuple[ExportTraceServiceRequest, bytes]]:
    """Every trace request of the recorded framework sessions, in recording order, with its
    protobuf bytes; each call gives messages of its own to change."""
    return [(classes.as_traces(classes.TraceRequest.FromString(body)), body) for body in _recorded_trace_bodies()]



@functools.cache
def _recorded_trace_bodies() -> tuple[bytes, ...]:
    """The bytes of ``recorded_trace_requests``' requests, read from the files once a process
    (reading them takes seconds; parsing the bytes again, milliseconds)."""
    found = []
    for path in sorted(FRAMEWORKS.glob("*/*.traces.jsonl")):
        for _, received in requests_in(path):
            if isinstance(received, ReceiveError) or received.signal != "traces":
                continue
            request = classes.as_traces(received.request)  # as the chain parses it
            found.append(request.SerializeToString())
    return tuple(found)


def assembled_sessions(requests: list[tuple[ExportTraceServiceRequest, bytes]], raw: bool) -> list[Session]:
    """``requests`` through one assembler in order, then every session closed: the sessions,
    by id and revision.  ``raw``: each request's bytes are handed in (strings read in place)."""
    closed: list[Session] = []
    assembler = Assembler(parse({}).sessions, lambda session, _reason: closed.append(session))
    for n, (request, body) in enumerate(requests, 1):
        assembler.add_spans(request, n, raw=body if raw else None)
    assembler.close_all()
    return sorted(closed, key=lambda s: (s.session_id, s.revision))


def assembled(
    requests: list[tuple[ExportTraceServiceRequest, bytes | None]], tenant: str, **sessions: Any
) -> tuple[list[Session], dict[str, int], dict[str, int], int]:
    """``requests`` (message, bytes as received) through one ``Assembler`` with the
    ``sessions`` settings, for ``tenant``, every session closed at the end: the closed
    sessions by key and revision, the duplicates and close reasons counted, and the spans
    acknowledged."""
    closed: list[Session] = []
    assembler = Assembler(
        parse({"sessions": sessions}).sessions, lambda session, _reason: closed.append(session)
    )
    accepted = 0
    for n, (request, body) in enumerate(requests, 1):
        accepted += assembler.add_spans(request, n, raw=body, tenant=tenant).accepted
    assembler.close_all()
    order = sorted(closed, key=lambda s: (s.key, s.revision))
    return order, dict(assembler.duplicates), dict(assembler.closed_by_reason), accepted
