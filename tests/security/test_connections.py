"""Connection limits on every listener, against a real ``skillgauge serve`` held at a low
open-file limit by clients that connect and send nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from support import Server, export_grpc, metric_value, wait_for

from collector.config import ConfigError, parse
from collector.receiver.connections import RESERVED_FILES, AcceptErrors, fit_to_open_files, open_files_limit
from collector.receiver.grpc import server_options

OPEN_FILES = 1024
IDLE = 1_500
EMPTY = json.dumps({"resourceSpans": []}).encode()


def _healthz(srv: Server) -> int:
    with urllib.request.urlopen(f"{srv.status_url}/healthz", timeout=10) as resp:
        return int(resp.status)


def _post_empty(srv: Server) -> int:
    req = urllib.request.Request(f"{srv.http_url}/v1/traces", EMPTY, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _grpc_export_succeeds(srv: Server) -> bool:
    try:
        export_grpc(srv, b"")
        return True
    except grpc.RpcError:
        return False


def _closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (what it sent first is read)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_grpc_connections_cannot_take_the_process_down_at_its_open_file_limit(tmp_path: Path) -> None:
    srv = Server(tmp_path, open_files=OPEN_FILES)
    idle: list[socket.socket] = []
    try:
        lowered = [line for line in srv.log().splitlines() if "lowered to" in line]
        assert any("receivers.otlp.grpc.max_connections is 1024" in line for line in lowered), srv.log()
        started = time.monotonic()
        idle = [socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) for _ in range(IDLE)]
        peak = _open_files(srv.proc.pid)
        assert peak < OPEN_FILES
        assert _healthz(srv) == 200  # while all 1,500 are held
        assert _post_empty(srv) == 200
        wait_for(lambda: _grpc_export_succeeds(srv), timeout=60, interval=0.5)
        fresh_export_after = time.monotonic() - started
        assert _healthz(srv) == 200 and _post_empty(srv) == 200
        log_bytes = srv.log_path.stat().st_size
        print(
            f"{IDLE} idle connections held: server open files {peak} (limit {OPEN_FILES}); a fresh gRPC"
            f" export succeeded {fresh_export_after:.1f}s after they connected; log {log_bytes} bytes"
        )
        assert log_bytes < 1024 * 1024
        assert "Traceback" not in srv.log()
    finally:
        for sock in idle:
            sock.close()
        srv.stop()


def test_a_grpc_connection_that_sends_nothing_is_closed_at_the_handshake_timeout(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"grpc": {"handshake_timeout": "1s"}}}})
    try:
        with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) as quiet:
            assert _closed_by_server(quiet, timeout=20)
        assert _grpc_export_succeeds(srv)  # a client that speaks is served
    finally:
        srv.stop()


def test_a_grpc_connection_beyond_max_connections_is_closed_at_once(tmp_path: Path) -> None:
    srv = Server(
        tmp_path, {"receivers": {"otlp": {"grpc": {"max_connections": 2, "handshake_timeout": "60s"}}}}
    )
    held: list[socket.socket] = []
    try:
        held = [socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) for _ in range(2)]
        for sock in held:  # gRPC core greets each with its SETTINGS: both are taken
            sock.settimeout(10)
            assert sock.recv(4096)
        with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) as extra:
            assert _closed_by_server(extra, timeout=10)
        assert not any(_closed_by_server(sock, timeout=0.2) for sock in held)
        held.pop().close()
        wait_for(lambda: _grpc_export_succeeds(srv), timeout=30, interval=0.2)
    finally:
        for sock in held:
            sock.close()
        srv.stop()


def test_a_status_connection_beyond_its_cap_is_answered_503_and_health_answers_after(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"status": {"max_connections": 2}})
    held: list[socket.socket] = []
    try:
        held = [socket.create_connection(("127.0.0.1", srv.status_port), timeout=10) for _ in range(2)]
        # Accepted in the order they connected: the third finds the first two holding the cap.
        with socket.create_connection(("127.0.0.1", srv.status_port), timeout=10) as extra:
            extra.settimeout(10)
            assert extra.recv(4096).startswith(b"HTTP/1.1 503 ")
        for sock in held:
            sock.close()
        assert wait_for(lambda: _try_healthz(srv) == 200)
        line = next(x for x in srv.log().splitlines() if "refused a connection" in x)
        assert "status API" in line and "status.max_connections" in line
    finally:
        for sock in held:
            sock.close()
        srv.stop()


def _try_healthz(srv: Server) -> int:
    try:
        return _healthz(srv)
    except OSError:
        return 0


@pytest.mark.parametrize(
    ("caps", "limit", "expected"),
    [
        ({"a": 1024, "b": 1024}, None, {"a": 1024, "b": 1024}),
        ({"a": 100, "b": 100}, 200 + RESERVED_FILES, {"a": 100, "b": 100}),
        ({"a": 1024, "b": 1024, "c": 256}, 1024, {"a": 1024 * 896 // 2304, "b": 1024 * 896 // 2304, "c": 99}),
        ({"a": 10}, 50, {"a": 1}),
    ],
)
def test_caps_are_fitted_under_the_open_file_limit(
    caps: dict[str, int], limit: int | None, expected: dict[str, int]
) -> None:
    fitted, warnings = fit_to_open_files(caps, limit)
    assert fitted == expected
    assert len(warnings) == sum(fitted[k] < caps[k] for k in caps)
    assert all("(ulimit -n)" in w and "lowered to" in w for w in warnings)
    if limit is not None and limit > 2 * RESERVED_FILES:
        assert sum(fitted.values()) + RESERVED_FILES <= limit


async def test_failed_accepts_are_logged_once_a_minute_with_a_count_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(AcceptErrors())
    accepted = asyncio.Event()
    server = await asyncio.start_server(lambda r, w: accepted.set(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setblocking(False)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fillers = _fill_descriptor_holes()
    try:
        # Every descriptor number the limit allows is taken: the server's accept fails (EMFILE).
        resource.setrlimit(resource.RLIMIT_NOFILE, (fillers[-1] + 1, hard))
        with contextlib.suppress(BlockingIOError):
            client.connect(("127.0.0.1", port))
        handler = loop.get_exception_handler()
        assert isinstance(handler, AcceptErrors)
        async with asyncio.timeout(20):
            while handler.failures < 3:  # asyncio retries each second
                await asyncio.sleep(0.1)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for fd in fillers:
            os.close(fd)
    await asyncio.wait_for(accepted.wait(), 10)  # served once descriptors are free again
    lines = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "ERROR" and lines[0].exc_info is None
    assert "Too many open files" in lines[0].getMessage()
    client.close()
    server.close()
    loop.set_exception_handler(None)


def _fill_descriptor_holes() -> list[int]:
    """Descriptors opened until every number up to the highest in use is taken (the last
    one opened is the highest)."""
    highest = max(map(int, os.listdir("/proc/self/fd")))
    fillers = [os.open(os.devnull, os.O_RDONLY)]
    while fillers[-1] < highest:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
    return fillers


def test_the_line_after_a_quiet_minute_says_how_many_failures_it_stood_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    errors = AcceptErrors(every=60.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        for second in range(120):
            now[0] = float(second)
            errors(
                loop,
                {
                    "message": "socket.accept() out of system resource",
                    "exception": OSError(24, "Too many open files"),
                },
            )
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records if "cannot accept" in r.getMessage()]
    assert len(lines) == 2 and "(59 similar lines suppressed in the last 60s)" in lines[1]
    assert errors.failures == 120


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK header field, literal without indexing, new name (RFC 7541 6.2.2)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def test_a_grpc_call_whose_message_stalls_is_answered_at_the_read_timeout(tmp_path: Path) -> None:
    srv = Server(tmp_path, {"receivers": {"otlp": {"grpc": {"read_timeout": "1s"}}}})
    try:
        with socket.create_connection(("127.0.0.1", srv.grpc_port), timeout=10) as sock:
            headers = b"".join(
                _literal(name, value)
                for name, value in (
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":path", "/opentelemetry.proto.collector.trace.v1.TraceService/Export"),
                    (":authority", "skillgauge"),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                )
            )
            # A message announced as 1,000 bytes, of which 10 come; then nothing.
            sock.sendall(
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                + _frame(4, 0, 0, b"")  # SETTINGS
                + _frame(1, 4, 1, headers)  # HEADERS, END_HEADERS, stream 1
                + _frame(0, 0, 1, b"\x00" + (1_000).to_bytes(4, "big") + b"x" * 10)
            )
            reason = {"protocol": "grpc", "signal": "traces", "reason": "read_timeout"}
            wait_for(lambda: metric_value(srv.metrics(), "skillgauge_rejected_requests_total", **reason) == 1)
            sock.settimeout(10)
            answer = b""
            while b"grpc-status" not in answer and (chunk := sock.recv(4096)):
                answer += chunk
            assert b"grpc-status" in answer  # trailers, literal: the call was answered
        assert _grpc_export_succeeds(srv)
    finally:
        srv.stop()


def test_grpc_limits_and_keepalive_become_grpc_core_options() -> None:
    grpc_config = {
        "endpoint": "127.0.0.1:0",
        "max_connections": 300,
        "handshake_timeout": "5s",
        "max_concurrent_streams": 20,
        "keepalive": {
            "server_parameters": {"max_connection_idle": "10m", "max_connection_age": "1h", "time": "30s"},
            "enforcement_policy": {"min_time": "10s", "permit_without_stream": True},
        },
    }
    listener = parse({"receivers": {"otlp": {"grpc": grpc_config}}}).receivers.otlp.grpc
    assert listener is not None
    options = dict(server_options(listener))
    assert options["grpc.max_allowed_incoming_connections"] == 300
    assert options["grpc.server_handshake_timeout_ms"] == 5_000
    assert options["grpc.max_concurrent_streams"] == 20
    assert options["grpc.max_connection_idle_ms"] == 600_000
    assert options["grpc.max_connection_age_ms"] == 3_600_000
    assert options["grpc.max_connection_age_grace_ms"] == 2**31 - 1  # not set: never
    assert options["grpc.keepalive_time_ms"] == 30_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 10_000
    assert options["grpc.keepalive_permit_without_calls"] == 1


def test_a_grpc_limit_typo_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        parse({"receivers": {"otlp": {"grpc": {"endpoint": "127.0.0.1:0", "max_conections": 5}}}})
    assert "max_conections" in str(err.value)


def test_the_soft_open_file_limit_is_raised_towards_what_the_listeners_need() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard >= 3_000, "this test needs a hard limit of 3,000 files"
    resource.setrlimit(resource.RLIMIT_NOFILE, (1_000, hard))
    try:
        assert open_files_limit(3_000) == 3_000  # as a service manager's soft 1024 is lifted
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (3_000, hard)
        assert open_files_limit(2_000) == 3_000  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
